package host

import (
	"context"
	"errors"

	"github.com/minisandbox/msb/internal/sandbox"
)

// What a OneShot is made of: plain data of the sandbox layer, named here
// rather than copied, so that front ends describe a sandbox without
// reaching below the engine (docs/architecture.md).
type (
	// SandboxConfig describes one sandbox: its layers or the host base,
	// binds, environment, network, limits, user and stdio.
	SandboxConfig = sandbox.Config
	// Bind mounts a host path into a sandbox.
	Bind = sandbox.Bind
	// User is the uid and gid a sandbox's commands run as.
	User = sandbox.User
	// SandboxLimits bound a sandbox's resources; zero means the default.
	SandboxLimits = sandbox.Limits
	// Stdio is what a OneShot's command or shell is relayed to.
	Stdio = sandbox.Stdio
	// NetPolicy is what a filtered sandbox may reach.
	NetPolicy = sandbox.NetPolicy
)

// A sandbox's network (SandboxConfig.Network).
const (
	NetworkNone = sandbox.NetworkNone // a namespace of its own, with no route out
	NetworkHost = sandbox.NetworkHost // the host's network
	// NetworkFiltered: a namespace of its own with a way out under a
	// NetPolicy.
	NetworkFiltered = sandbox.NetworkFiltered
)

// ErrInvalidConfig: a SandboxConfig that cannot be built; the message
// says why.
var ErrInvalidConfig = sandbox.ErrInvalidConfig

// Exit codes of a command the sandbox could not start, as a shell gives
// them (StartError.Code).
const (
	CodeNotExecutable = 126
	CodeNoCommand     = 127
)

// StartError: the sandbox could not start the command, because it was not
// found (Code CodeNoCommand) or not executable (CodeNotExecutable); Msg is
// the sandbox's account of it.
type StartError struct {
	Code int
	Msg  string
	err  error
}

func (e *StartError) Error() string { return e.err.Error() }
func (e *StartError) Unwrap() error { return e.err }

// startError is err, or a StartError when err is the sandbox's refusal to
// start the command, which ended with code.
func startError(code int, err error) error {
	var oe *sandbox.OpError
	if err == nil || !errors.As(err, &oe) || code != CodeNoCommand && code != CodeNotExecutable {
		return err
	}
	return &StartError{Code: code, Msg: oe.Msg, err: err}
}

// OneShot is a sandbox of its own for one command or one shell (msb run,
// msb shell): outside admission, lifetimes and the Engine's registry of
// live sandboxes, its commands talking to SandboxConfig.Stdio. Close it,
// then the Host.
type OneShot struct {
	sb *sandbox.Sandbox
}

// Start creates a OneShot described by cfg.
func (h *Host) Start(ctx context.Context, cfg SandboxConfig) (*OneShot, error) {
	sb, err := h.rt.Create(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &OneShot{sb: sb}, nil
}

// Run runs argv, without a terminal, on the sandbox's stdio and returns
// its exit code once its output has been relayed; a command the sandbox
// could not start is a StartError.
func (o *OneShot) Run(ctx context.Context, argv []string) (int, error) {
	code, err := o.sb.Run(ctx, argv)
	return code, startError(code, err)
}

// Shell runs argv (default an interactive bash) on a pty of rows by cols
// relayed to the sandbox's stdio, which the caller has put in raw mode;
// errors as Run's.
func (o *OneShot) Shell(ctx context.Context, argv []string, rows, cols uint16) (int, error) {
	code, err := o.sb.Shell(ctx, argv, rows, cols)
	return code, startError(code, err)
}

// Resize changes the window size of the running Shell.
func (o *OneShot) Resize(ctx context.Context, rows, cols uint16) error {
	return o.sb.Resize(ctx, rows, cols)
}

// oomKills is how many times the kernel's OOM killer killed a process of
// the sandbox (0 when its usage cannot be read).
func (o *OneShot) oomKills() int64 {
	u, err := o.sb.Usage()
	if err != nil {
		return 0
	}
	return u.OOMKills
}

// UpperDir is the sandbox's writable layer, kept after Close with
// SandboxConfig.KeepUpper.
func (o *OneShot) UpperDir() string { return o.sb.UpperDir() }

// Close stops the sandbox and removes what it made.
func (o *OneShot) Close() error { return o.sb.Close() }

// CommandResult is what became of a command that Host.Run ran.
type CommandResult struct {
	// Code is the command's exit code (128+n for signal n).
	Code int
	// OOMKills, when the command was killed by SIGKILL, is how many times
	// the kernel's OOM killer killed in the sandbox: non-zero when the
	// sandbox reached its memory limit.
	OOMKills int64
	// UpperDir is the kept writable layer (SandboxConfig.KeepUpper).
	UpperDir string
}

// sigkill is the exit code of a command killed by SIGKILL.
const sigkill = 128 + 9

// Run runs argv in a new OneShot described by cfg (msb run) and closes it.
// An error that ended the command is returned with what is known of it: a
// command the sandbox could not start is a StartError.
func (h *Host) Run(ctx context.Context, cfg SandboxConfig, argv []string) (CommandResult, error) {
	o, err := h.Start(ctx, cfg)
	if err != nil {
		return CommandResult{}, err
	}
	code, err := o.sb.Run(ctx, argv)
	res := CommandResult{Code: code}
	if code == sigkill {
		res.OOMKills = o.oomKills()
	}
	if cerr := o.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return res, startError(code, err)
	}
	res.UpperDir = o.UpperDir()
	return res, nil
}
