package session

import (
	"errors"
	"os/exec"
	"time"
)

// Defaults applied by Start and RunOnce to zero Options fields.
const (
	DefaultShell     = "/bin/bash"
	DefaultMaxOutput = 1 << 20
	DefaultKillGrace = 2 * time.Second
)

// MarkerEnv is the environment variable, set to a random value per session
// (or per RunOnce), that every process of a session inherits. Close uses it to
// find processes that left the shell's process tree (setsid, double fork).
const MarkerEnv = "MSB_SESSION_ID"

// Errors returned by this package; test with errors.Is.
var (
	// ErrSessionEnded: the shell exited (exit, exec, set -e, killed, Close).
	ErrSessionEnded = errors.New("session ended")
	// ErrInvalidCommand: the command holds a NUL byte, which bash cannot run.
	ErrInvalidCommand = errors.New("invalid command")
	// ErrStatusLost: the shell went back to reading commands without
	// reporting the command's status; the command most likely redefined
	// `builtin`, disabled builtins (enable -n) or set a DEBUG trap that skips
	// commands. The session stays usable as far as the shell allows.
	ErrStatusLost = errors.New("command status lost")
	// ErrNotInteractive: an Input request while no interactive command
	// waits for input.
	ErrNotInteractive = errors.New("no interactive command is running")
	// ErrInteractiveRunning: a command (not Input) while an interactive
	// command still runs; send it input, or interrupt it.
	ErrInteractiveRunning = errors.New("an interactive command is running")
	// ErrNoTerminal: an interactive command in a session that could not
	// open a pseudo-terminal (no /dev/ptmx).
	ErrNoTerminal = errors.New("no terminal for interactive commands")
	// ErrSurvivors: processes of a closed session or of a finished RunOnce
	// were still alive well after their SIGKILL (asleep in D state, or in
	// a frozen cgroup v1 freezer); the error names them.
	ErrSurvivors = errors.New("processes survived SIGKILL")
)

// Options for a session's shell (and for RunOnce).
type Options struct {
	// Shell is the bash binary. Default DefaultShell. Only bash is supported.
	Shell string
	// Env is the full environment for the shell; nil means os.Environ().
	// MarkerEnv is appended.
	Env []string
	// Dir is the initial working directory; "" means the caller's.
	Dir string
	// MaxOutput caps each stream of each command, in bytes. Default
	// DefaultMaxOutput.
	MaxOutput int
	// KillGrace is the time between interrupting a timed-out command
	// (SIGINT) and killing it (SIGKILL). Default DefaultKillGrace.
	KillGrace time.Duration
	// ChanDir is the directory in which a session makes the named pipes
	// its frames open by path (see doc.go); the engine must be able to
	// create files in it and the shell to open them. Default: a new
	// directory under os.TempDir, removed by Close. RunOnce does not use it.
	ChanDir string
	// Start starts the shell's process. Default (*exec.Cmd).Start. A
	// sandbox's supervisor passes one that forks from the thread whose
	// capabilities and namespaces its processes must have.
	Start func(*exec.Cmd) error
	// Gate, when set, bounds the goroutines of sessions and RunOnce that
	// run at once (see Gate). Default: no bound.
	Gate Gate
}

// Gate bounds how many goroutines do their work at once. A goroutine in a
// system call holds an OS thread while the call lasts, and a sandbox's
// supervisor has only the threads it made before the agent's commands ran
// (a fork bomb fills the pids limit, threads count against it, and a Go
// runtime that cannot make a thread it needs dies). A command's work
// (starting it, reading its output, killing what it left) enters the gate
// once it holds every lock it needs (a session's), and leaves it while it
// waits for the command (pollFor, in the netpoller) and when it is done: a
// goroutine inside never waits for one outside, so the gate cannot deadlock.
type Gate interface {
	Enter()
	Leave()
}

// openGate is the default Gate: no bound.
type openGate struct{}

func (openGate) Enter() {}
func (openGate) Leave() {}

func (o Options) withDefaults() Options {
	if o.Shell == "" {
		o.Shell = DefaultShell
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	if o.KillGrace <= 0 {
		o.KillGrace = DefaultKillGrace
	}
	if o.Gate == nil {
		o.Gate = openGate{}
	}
	if o.Start == nil {
		o.Start = (*exec.Cmd).Start
	}
	return o
}

// ExecRequest is one command for Exec or RunOnce.
type ExecRequest struct {
	// Command is bash source text: one or more lines, run as if typed at
	// an interactive prompt. It must not contain NUL.
	Command string `json:"command"`
	// Timeout bounds the command; 0 means none.
	Timeout time.Duration `json:"timeout_ns,omitempty"`
	// SeparateStderr returns stderr in Result.Stderr; by default stderr is
	// merged into Result.Output in the order it was written.
	SeparateStderr bool `json:"separate_stderr,omitempty"`
	// MaxOutput overrides Options.MaxOutput for this command when > 0.
	MaxOutput int `json:"max_output,omitempty"`

	// Interactive starts Command with the session's terminal as its stdin
	// (a pseudo-terminal without echo, line by line) instead of the pipe
	// nobody writes to, so that a REPL (python3, gdb) prompts and reads.
	// Exec then returns when the output matches one of Expect (Result.Running,
	// Result.Matched), when the command completes, or when Timeout passes
	// (Result.Running and TimedOut; the command is not interrupted). While
	// it runs, only Input requests are accepted. Output is merged (no
	// SeparateStderr).
	Interactive bool `json:"interactive,omitempty"`
	// Input sends Command, byte for byte, to the running interactive
	// command's terminal (add the "\n" that ends a line), and then waits as
	// an Interactive Exec does.
	Input bool `json:"input,omitempty"`
	// Interrupt, with Input, first interrupts the interactive command as a
	// timeout does (Ctrl-C, SIGKILL after KillGrace; Ctrl-C again whenever
	// the program has printed nothing for 250 ms), then waits for a
	// match or its end; Timeout does not apply. A program that survives
	// the interrupt and prints a pattern (python3's ">>> ") keeps running.
	Interrupt bool `json:"interrupt,omitempty"`
	// Expect are regular expressions (Go's RE2 syntax) matched against an
	// interactive command's output not yet returned; the earliest match
	// ends the wait. Output before it is returned, the match is consumed,
	// and output after it waits for the next call.
	Expect []string `json:"expect,omitempty"`

	// OnOutput, for RunOnce, receives the command's output as it is read
	// (stderr tells which stream, with SeparateStderr), besides Result. The
	// command's pipe is not read while OnOutput runs, so a slow OnOutput
	// makes the command wait in its write: back-pressure, with no more
	// than one read's bytes held here. p is reused after it returns.
	OnOutput func(stderr bool, p []byte) `json:"-"`
}

// Result of one command.
type Result struct {
	// Output is the command's stdout (and stderr unless SeparateStderr).
	// It is valid UTF-8: invalid bytes and NUL appear as the four
	// characters \xNN. When the output exceeded the cap, its first and last
	// halves are kept and joined by a line
	// "[... N bytes of output omitted ...]".
	Output string `json:"output"`
	// Stderr is the command's stderr when SeparateStderr was set, with the
	// same encoding and cap as Output.
	Stderr string `json:"stderr,omitempty"`
	// ExitCode is the command's exit status ($?); when SessionEnded, the
	// shell's exit status (128+n if killed by signal n).
	ExitCode int `json:"exit_code"`
	// Duration is the wall time from sending the command to its status.
	Duration time.Duration `json:"duration_ns"`
	// Truncated: Output or Stderr exceeded the cap.
	Truncated bool `json:"truncated,omitempty"`
	// TimedOut: the command ran past its Timeout (or its context ended)
	// and was interrupted.
	TimedOut bool `json:"timed_out,omitempty"`
	// SessionEnded: the shell exited during this command (exit, exec,
	// set -e, ...). Further Exec calls return ErrSessionEnded.
	SessionEnded bool `json:"session_ended,omitempty"`
	// Running: an interactive command has not completed; ExitCode means
	// nothing yet. Send it Input (or interrupt it). With TimedOut, the
	// wait ran past its Timeout and Output is what the command printed
	// so far, which is not consumed: the next call returns it again.
	Running bool `json:"running,omitempty"`
	// Matched is the Expect pattern whose match ended the wait.
	Matched string `json:"matched,omitempty"`
}
