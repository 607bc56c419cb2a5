package host

import "github.com/minisandbox/msb/internal/sandbox"

// GCReport says what a collection removed of the sandboxes of msb
// processes that died (their init processes, cgroups and state dirs), and
// what it could not. It is the sandbox layer's report, plain data, named
// here so that front ends need not reach below the engine.
type GCReport = sandbox.GCReport

// GC collects what killed msb processes left behind under the Host's
// state dir; sandboxes of live msb processes are left alone.
func (h *Host) GC() GCReport { return h.rt.GC() }

// ReleaseDiskPool removes the host's disk pool when no live sandbox uses
// it; false when there was none (sandbox.Runtime.ReleaseDiskPool).
func (h *Host) ReleaseDiskPool() (bool, error) { return h.rt.ReleaseDiskPool() }

// HasDiskPool reports whether the host's disk pool exists, without making
// one (sandbox.Runtime.HasDiskPool).
func (h *Host) HasDiskPool() bool { return h.rt.HasDiskPool() }
