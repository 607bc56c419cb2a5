// Package host is the engine's Host: this machine's sandbox runtime alone,
// for the front ends that start a sandbox of their own (msb run, msb shell)
// or look after the host (msb doctor, msb gc). It is the part of package
// engine that needs neither the environment cache nor specs, datasets or
// graders, kept in a package of its own so that a binary that only runs
// sandboxes (the lean msb, docs/architecture.md) links none of them;
// package engine names each of its nouns, so front ends that hold an
// Engine write engine.Host as before.
//
// The nouns:
//
//   - Host: the runtime under one state dir (Open, Close); Run runs one
//     command in a new sandbox, Start makes a OneShot, Doctor checks the
//     kernel, GC collects what killed msb processes left behind.
//   - OneShot: a sandbox of its own for one command or an interactive
//     shell, outside admission and the Engine's registry.
//   - StartError: a command the sandbox could not start (127, 126).
//   - Kinds: the kind of each error of the sandbox layer in the one
//     vocabulary of msb's errors (api.ErrorCode); package engine adds its
//     own sentinels to the same table.
package host

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

// Config is what Open takes: engine.Config's StateDir, CgroupParent and
// Logger, with the same defaults.
type Config struct {
	StateDir     string
	CgroupParent string
	Logger       *slog.Logger
}

// Open opens the sandbox runtime under cfg.StateDir. It collects nothing
// (unlike engine.Open): call GC for that.
func Open(cfg Config) (*Host, error) {
	rt, err := sandbox.NewRuntime(sandbox.RuntimeOptions{StateDir: cfg.StateDir, CgroupParent: cfg.CgroupParent, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	return &Host{rt: rt}, nil
}

// Wrap is the Host of a runtime opened elsewhere (an Engine's own), for
// running a OneShot beside the Engine's sandboxes.
func Wrap(rt *sandbox.Runtime) *Host { return &Host{rt: rt} }

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
