package session

import (
	"errors"
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
}

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
}
