package api

// Limits bound a sandbox's resources; zero means the engine's default.
type Limits struct {
	MemoryBytes int64   `json:"memory_bytes,omitempty"`
	Pids        int64   `json:"pids,omitempty"`
	CPUs        float64 `json:"cpus,omitempty"`
	TmpBytes    int64   `json:"tmp_bytes,omitempty"`
	DiskBytes   int64   `json:"disk_bytes,omitempty"`
}

// ExecRequest is one command in a sandbox.
type ExecRequest struct {
	// Command is bash source text, of any size up to the server's body
	// cap (it never travels as an argument, so ARG_MAX does not apply).
	Command string `json:"command"`
	// Session names a persistent shell opened before; empty runs the
	// command in a fresh bash. Cwd, Env and Stdin are for a fresh bash
	// only (a session has its own directory and variables).
	Session string `json:"session,omitempty"`
	// Cwd is the fresh bash's working directory (default: the sandbox's).
	Cwd string `json:"cwd,omitempty"`
	// Env holds NAME=value entries added to the fresh bash's environment.
	Env List[string] `json:"env,omitempty"`
	// Stdin is the command's standard input (default: none; reading it
	// gets end of file).
	Stdin string `json:"stdin,omitempty"`
	// TimeoutNs bounds the command; 0 means none. A command that runs
	// past it is interrupted (SIGINT, then SIGKILL) and its result says
	// timed_out.
	TimeoutNs int64 `json:"timeout_ns,omitempty"`
	// SeparateStderr returns stderr in ExecResult.Stderr instead of merged
	// into Stdout in the order it was written.
	SeparateStderr bool `json:"separate_stderr,omitempty"`
	// MaxOutput caps each stream in bytes (0: the sandbox's cap, 1 MiB by
	// default); capped output keeps its head and tail.
	MaxOutput int `json:"max_output,omitempty"`

	// Interactive (sessions only) starts Command with a terminal as its
	// stdin (no echo, line by line), so that a REPL such as python3 or
	// gdb prompts and reads; output is merged. The call returns when the
	// output matches one of Expect (running, matched), when the command
	// completes, or when TimeoutNs passes (running and timed_out; the
	// command is not interrupted). While it runs the session takes only
	// input requests.
	Interactive bool `json:"interactive,omitempty"`
	// Input (sessions only) sends Command, byte for byte, to the running
	// interactive command's terminal (end a line with "\n"), then waits
	// as an interactive request does.
	Input bool `json:"input,omitempty"`
	// Interrupt, with Input, first interrupts the interactive command as
	// Ctrl-C would (pressed again every 250 ms while the program prints
	// nothing, SIGKILL after the grace time), then waits for a match
	// of Expect or its end; TimeoutNs does not apply. A program that
	// survives (python3 prints its prompt again) keeps running.
	Interrupt bool `json:"interrupt,omitempty"`
	// Expect holds regular expressions (RE2 syntax) matched against the
	// interactive command's output not returned yet; the earliest match
	// ends the wait. Stdout is the output before it; what follows the
	// match is kept for the next request.
	Expect List[string] `json:"expect,omitempty"`
}

// ExecResult is what a command did.
type ExecResult struct {
	// Stdout is the command's standard output, with its standard error
	// merged in unless the request asked for separate streams. It is
	// valid UTF-8 (invalid bytes escaped as the four characters \xNN);
	// capped output keeps its head and tail around a line saying how much
	// was left out.
	Stdout string `json:"stdout"`
	// Stderr is the standard error when the request asked for separate
	// streams, else empty.
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
	// DurationNs is the wall time from sending the command to its status.
	DurationNs int64 `json:"duration_ns"`
	// Truncated: a stream exceeded the cap.
	Truncated bool `json:"truncated"`
	// TimedOut: the command ran past its timeout, or was interrupted, and
	// was stopped; ExitCode is then what the shell reported (130 after
	// SIGINT, 137 after SIGKILL).
	TimedOut bool `json:"timed_out"`
	// SessionEnded: the session's shell exited during the command (exit,
	// exec, set -e); the session is gone.
	SessionEnded bool `json:"session_ended"`
	// Running: an interactive command has not completed (ExitCode means
	// nothing yet); send it input. With TimedOut, the wait ran past its
	// timeout and Stdout, what it printed so far, is not consumed: the
	// next request returns it again.
	Running bool `json:"running"`
	// Matched is the Expect pattern whose match ended the wait.
	Matched string `json:"matched"`
}

// SessionRequest opens a persistent shell.
type SessionRequest struct {
	Name string       `json:"name"`
	Env  List[string] `json:"env,omitempty"` // NAME=value, on top of the sandbox's
	// Dir is the shell's first working directory (default: the
	// sandbox's: /testbed for a task sandbox).
	Dir string `json:"dir,omitempty"`
}

// FileEntry is one directory entry inside a sandbox.
type FileEntry struct {
	Name    string `json:"name"`
	Type    string `json:"type"` // file, dir, symlink, other
	Size    int64  `json:"size"`
	Mode    uint32 `json:"mode"`
	Target  string `json:"target,omitempty"`
	ModTime int64  `json:"mtime"`
	// UID and GID own the entry, as the sandbox sees them (in a rootless
	// sandbox, ids of its user namespace).
	UID int `json:"uid"`
	GID int `json:"gid"`
}

// Sandbox states.
const (
	SandboxRunning = "running"
	// SandboxClosed: closed by its owner (DELETE, the engine closing).
	SandboxClosed = "closed"
	// SandboxReaped: closed by the engine because its lifetime ended or it
	// was idle too long; Reason says which.
	SandboxReaped = "reaped"
)

// Reasons a sandbox was reaped.
const (
	ReapLifetime = "lifetime"     // it lived past its lifetime
	ReapIdle     = "idle_timeout" // nothing used it for its idle timeout
)

// SandboxInfo describes a sandbox of the engine: a live one, or one that
// was closed recently (State says which).
type SandboxInfo struct {
	ID string `json:"id"`
	// InstanceID is the instance whose task the sandbox holds; empty for a
	// sandbox made from raw layers.
	InstanceID string              `json:"instance_id,omitempty"`
	Labels     Map[string, string] `json:"labels"`
	Limits     Limits              `json:"limits"`
	Mode       string              `json:"mode"`       // root or rootless
	CreatedAt  string              `json:"created_at"` // RFC 3339
	Sessions   List[string]        `json:"sessions"`
	// State is running, closed or reaped; Reason says why it is not
	// running (for reaped: lifetime or idle_timeout).
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// LifetimeNs and IdleTimeoutNs are the sandbox's bounds (0: none);
	// ExpiresAt is when its lifetime ends (RFC 3339, empty without one).
	LifetimeNs    int64  `json:"lifetime_ns"`
	IdleTimeoutNs int64  `json:"idle_timeout_ns"`
	ExpiresAt     string `json:"expires_at,omitempty"`
	// LastActiveAt is when the last operation on it ended (or, while one
	// runs, now).
	LastActiveAt string `json:"last_active_at"`
	ClosedAt     string `json:"closed_at,omitempty"`
}

// Check is one line of msb doctor.
type Check struct {
	Name     string `json:"name"`
	OK       bool   `json:"ok"`
	Detail   string `json:"detail"`
	Fix      string `json:"fix,omitempty"`
	Required bool   `json:"required"`
}

// Enforcement says, per limit, what enforces it.
type Enforcement struct {
	Memory string `json:"memory"`
	Pids   string `json:"pids"`
	CPU    string `json:"cpu"`
	Tmp    string `json:"tmp"`
	Disk   string `json:"disk"`
	// HostFiles says what a sandbox can read of the host's files.
	HostFiles string `json:"host_files"`
}

// DoctorReport is what msb doctor found.
type DoctorReport struct {
	Mode        string      `json:"mode"`
	StateDir    string      `json:"state_dir"`
	Enforcement Enforcement `json:"enforcement"`
	Checks      List[Check] `json:"checks"`
	OK          bool        `json:"ok"`
}

// SandboxUsage is what a sandbox uses now (from its cgroup).
type SandboxUsage struct {
	MemoryBytes     int64  `json:"memory_bytes"`
	MemoryPeakBytes int64  `json:"memory_peak_bytes"`
	Pids            int64  `json:"pids"`
	CPUNanos        uint64 `json:"cpu_nanos"`
	OOMKills        int64  `json:"oom_kills"`
	PidsLimitHits   int64  `json:"pids_limit_hits"`
}

// BenchRow is one measurement of msb bench.
type BenchRow struct {
	Name   string  `json:"name"`
	N      int     `json:"n"`
	P50Ns  int64   `json:"p50_ns"`
	P95Ns  int64   `json:"p95_ns"`
	Value  float64 `json:"value,omitempty"`
	Unit   string  `json:"unit,omitempty"`
	Note   string  `json:"note,omitempty"`
	Failed string  `json:"failed,omitempty"`
}

// BenchReport is msb bench's --json output.
type BenchReport struct {
	Mode string         `json:"mode,omitempty"`
	Rows List[BenchRow] `json:"rows"`
}
