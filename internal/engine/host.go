package engine

import "github.com/minisandbox/msb/internal/engine/host"

// The Host and what it is made of live in package host, which a binary
// that only runs sandboxes links without the engine (docs/architecture.md);
// they are named here so that front ends holding an Engine need only this
// package.
type (
	// Host is the sandbox runtime alone (host.Host).
	Host = host.Host
	// HostConfig is what OpenHost takes.
	HostConfig = host.Config
	// OneShot is a sandbox of its own for one command or one shell.
	OneShot = host.OneShot
	// CommandResult is what became of a command that Host.Run ran.
	CommandResult = host.CommandResult
	// StartError: the sandbox could not start the command (127, 126).
	StartError = host.StartError
	// Diagnosis is what Host.Doctor found.
	Diagnosis = host.Diagnosis
	// GCReport says what a collection removed and what it could not.
	GCReport = host.GCReport
	// SandboxConfig describes one sandbox.
	SandboxConfig = host.SandboxConfig
	// Bind mounts a host path into a sandbox.
	Bind = host.Bind
	// User is the uid and gid a sandbox's commands run as.
	User = host.User
	// SandboxLimits bound a sandbox's resources; zero means the default.
	SandboxLimits = host.SandboxLimits
	// Stdio is what a OneShot's command or shell is relayed to.
	Stdio = host.Stdio
	// NetPolicy is what a filtered sandbox may reach.
	NetPolicy = host.NetPolicy
)

// A sandbox's network (SandboxConfig.Network).
const (
	NetworkNone     = host.NetworkNone
	NetworkHost     = host.NetworkHost
	NetworkFiltered = host.NetworkFiltered
)

// Exit codes of a command the sandbox could not start (StartError.Code).
const (
	CodeNotExecutable = host.CodeNotExecutable
	CodeNoCommand     = host.CodeNoCommand
)

// ErrInvalidConfig: a SandboxConfig that cannot be built.
var ErrInvalidConfig = host.ErrInvalidConfig

// OpenHost opens the sandbox runtime under cfg.StateDir (host.Open).
func OpenHost(cfg HostConfig) (*Host, error) { return host.Open(cfg) }
