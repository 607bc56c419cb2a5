package sandbox

import (
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/sandbox/sbinit"
	"github.com/minisandbox/msb/internal/sandbox/wire"
)

// Phase is how long one step of a sandbox's creation or close took.
// Names are "create.<step>", "close.<step>" (on the caller's path) and
// "cleanup.<step>" (after Close returned, see Sandbox.Cleaned). Phases can
// overlap: create.attach (the host puts init in its cgroups) runs while
// init starts and builds the root (create.init-runtime, init-mounts), and
// create.init-wait-start is what init then waited for it.
type Phase struct {
	Name     string
	Duration time.Duration
}

// Phase names, in the order they happen; create.init-* and create.sup-*
// come from the stamps in the ready answer.
const (
	PhaseDirs       = "create.dirs"            // state dir, owner lock (the first sandbox: the disk pool too)
	PhaseDisk       = "create.disk"            // the bounded disk (a pool volume with its quota)
	PhaseCgroup     = "create.cgroup"          // cgroup made and limited (beside create.disk)
	PhaseConfig     = "create.config"          // what init is told (waits for the runtime's idmap namespace)
	PhaseSpawn      = "create.spawn"           // clone in new namespaces and execve of init
	PhaseAttach     = "create.attach"          // init's pid written to the cgroups
	PhaseDeferred   = "create.deferred"        // waiting for CreateDeferred's layers (a fork's snapshot), beside the spawn, init's start and the attach
	PhaseRootAhead  = "create.root-ahead"      // the host builds the root's first part in init's mount namespace (sbinit.BuildAhead), beside init's runtime start
	PhaseInitRun    = "create.init-runtime"    // spawned until init's config is read (its Go runtime start; with CreateDeferred, also the wait for the layers; with create.root-ahead, also the wait for it)
	PhaseMounts     = "create.init-mounts"     // init builds the root and pivots
	PhaseWaitStart  = "create.init-wait-start" // until the host's start: the cgroup attach done
	PhaseInitCaps   = "create.init-caps"       // cgroup namespace, bounding set, the supervisor's capabilities
	PhaseSupRuntime = "create.sup-runtime"     // execve of the supervisor until its main (an init built with cgo only)
	PhaseSupHarden  = "create.sup-harden"      // seccomp and the rest of harden
	PhaseSupSession = "create.sup-session"     // Config.Session's shell started and answering (the spare threads made meanwhile)
	PhaseSupReady   = "create.sup-ready"       // hardened until the host has the ready answer
	PhaseCreate     = "create.total"
	PhaseShutdown   = "close.shutdown" // the supervisor's answer to shutdown
	PhaseReap       = "close.reap"     // until init is reaped (only where the supervisor did not end the rest itself, or Close needs init's mounts gone)
	PhaseRelease    = "close.release"  // stdio relays, the control socket; a caller's trees (their mounts, kept upper, work dir)
	PhaseClose      = "close.total"
	PhaseExit       = "cleanup.exit"   // init's own exit after the supervisor answered shutdown: its memory torn down, until reaped
	PhaseMountsRm   = "cleanup.mounts" // the sandbox's mounts undone (see holdMounts)
	PhaseVolume     = "cleanup.volume" // btrfs subvolume deleted
	PhaseCgroupRm   = "cleanup.cgroup" // cgroup dirs removed
	PhaseStateRm    = "cleanup.state"  // state dir removed
	PhaseCleanup    = "cleanup.total"
)

// stampPhases name the intervals between init's and the supervisor's
// stamps: the phase ending at each step.
var stampPhases = map[string]string{
	sbinit.StepInitConfig: PhaseInitRun, sbinit.StepInitRoot: PhaseMounts, sbinit.StepInitStart: PhaseWaitStart,
	sbinit.StepInitCaps: PhaseInitCaps, sbinit.StepSupMain: PhaseSupRuntime, sbinit.StepSupHarden: PhaseSupHarden,
	sbinit.StepSupSession: PhaseSupSession,
}

// timings collects a sandbox's phases.
type timings struct {
	mu     sync.Mutex // guards phases
	phases []Phase
}

func (t *timings) add(name string, d time.Duration) {
	t.mu.Lock()
	t.phases = append(t.phases, Phase{name, d})
	t.mu.Unlock()
}

// since adds the phase name that began at start and returns now.
func (t *timings) since(name string, start time.Time) time.Time {
	now := time.Now()
	t.add(name, now.Sub(start))
	return now
}

// stamps adds the phases between init's and the supervisor's stamps, from
// spawned (CLOCK_MONOTONIC when the host spawned init) to readyAt (when it
// read the ready answer).
func (t *timings) stamps(spawned int64, stamps []wire.Stamp, readyAt int64) {
	prev := spawned
	for _, s := range stamps {
		if name, ok := stampPhases[s.Step]; ok && s.Mono >= prev {
			t.add(name, time.Duration(s.Mono-prev))
		}
		prev = s.Mono
	}
	if len(stamps) > 0 && readyAt >= prev {
		t.add(PhaseSupReady, time.Duration(readyAt-prev))
	}
}

func (t *timings) list() []Phase {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Phase(nil), t.phases...)
}
