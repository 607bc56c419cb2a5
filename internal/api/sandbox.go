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
	// Command is bash source text.
	Command string `json:"command"`
	// Session names a persistent shell opened before; empty runs the
	// command in a fresh bash.
	Session string `json:"session,omitempty"`
	// TimeoutNs bounds the command; 0 means none.
	TimeoutNs int64 `json:"timeout_ns,omitempty"`
	// SeparateStderr returns stderr in ExecResult.Stderr instead of merged
	// into Output.
	SeparateStderr bool `json:"separate_stderr,omitempty"`
	// MaxOutput caps each stream in bytes (0: the sandbox's cap).
	MaxOutput int `json:"max_output,omitempty"`
}

// ExecResult is what a command did.
type ExecResult struct {
	// Output is valid UTF-8 (invalid bytes escaped as \xNN); capped
	// output keeps its head and tail.
	Output       string `json:"output"`
	Stderr       string `json:"stderr,omitempty"`
	ExitCode     int    `json:"exit_code"`
	DurationNs   int64  `json:"duration_ns"`
	Truncated    bool   `json:"truncated"`
	TimedOut     bool   `json:"timed_out"`
	SessionEnded bool   `json:"session_ended"`
}

// SessionRequest opens a persistent shell.
type SessionRequest struct {
	Name string       `json:"name"`
	Env  List[string] `json:"env,omitempty"` // NAME=value, on top of the sandbox's
	Dir  string       `json:"dir,omitempty"`
}

// FileEntry is one directory entry inside a sandbox.
type FileEntry struct {
	Name    string `json:"name"`
	Type    string `json:"type"` // file, dir, symlink, other
	Size    int64  `json:"size"`
	Mode    uint32 `json:"mode"`
	Target  string `json:"target,omitempty"`
	ModTime int64  `json:"mtime"`
}

// SandboxInfo describes a live sandbox of the engine.
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
