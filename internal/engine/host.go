package engine

import (
	"log/slog"

	"github.com/minisandbox/msb/internal/sandbox"
)

// Host is this machine's sandbox runtime alone, without the cache, the
// specs, admission or the registry of live sandboxes: what a command that
// starts a sandbox of its own (msb run, msb shell, see OneShot) and the
// host's upkeep (msb doctor, msb gc) need. An Engine holds a runtime of
// its own; a Host is for the front ends that do not open one.
type Host struct {
	rt *sandbox.Runtime
}

// HostConfig is what OpenHost takes: Config's StateDir, CgroupParent and
// Logger, with the same defaults.
type HostConfig struct {
	StateDir     string
	CgroupParent string
	Logger       *slog.Logger
}

// OpenHost opens the sandbox runtime under cfg.StateDir. Unlike Open, it
// collects nothing: call GC for that.
func OpenHost(cfg HostConfig) (*Host, error) {
	rt, err := sandbox.NewRuntime(sandbox.RuntimeOptions{StateDir: cfg.StateDir, CgroupParent: cfg.CgroupParent, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	return &Host{rt: rt}, nil
}

// Close closes the runtime; it waits for the cleanup of the sandboxes it
// started, so close them first.
func (h *Host) Close() error { return h.rt.Close() }

// Runtime is the sandbox runtime itself, for the benchmark alone
// (internal/bench), which measures that layer; front ends use the Host's
// methods.
func (h *Host) Runtime() *sandbox.Runtime { return h.rt }

// DefaultStateDir is the state directory for the calling user when none
// is configured: /run/msb for root, else <runtimeDir>/msb (runtimeDir is
// the caller's $XDG_RUNTIME_DIR) or /tmp/msb-<uid> without one.
func DefaultStateDir(runtimeDir string) string { return sandbox.DefaultStateDir(runtimeDir) }
