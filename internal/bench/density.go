package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/minisandbox/msb/internal/cgroup"
)

// PSS phases.
const (
	PhasePSS      = "pss"      // the task's whole process tree
	PhaseTop      = "top"      // its root process: msb's supervisor, the paper's unshare, podman's conmon
	PhaseMemAvail = "memavail" // MemAvailable's drop per task (page cache and kernel objects included)
	PhaseHost     = "host"     // growth of the benchmark process itself per task (msb's host side)
)

// density holds Density idle tasks of each method at once, each with a
// shell that has answered a command (msb: a session; the paper: its
// chroot shell; podman: the container's bash under conmon), and records
// each task's PSS once they have all been idle for Idle.
func (b *bencher) density(ctx context.Context, w *workload) {
	ms := b.methods(w, true)
	for _, m := range ms {
		if p, ok := m.(*podmanMethod); ok {
			// its idle shell is the container's own bash under conmon
			p.session = false
		}
	}
	byName, names := index(ms)
	failed := interleave(ctx, 1, 0, names, func(ctx context.Context, round, slot int, name string) error {
		return b.hold(ctx, w, byName[name], round, slot)
	})
	b.failures(MeasurePSS, w, failed)
}

// idleCommand is what a PSS task runs Options.IdleCommands times: an
// agent's small command, 1.5 kB of output, with the same program in every
// method's root (coreutils' seq).
const idleCommand = "seq 1 400"

// pssParam is the PSS samples' Param: the tasks held at once, and the
// commands each ran after its first when there were any.
func pssParam(o Options) string {
	if o.IdleCommands > 0 {
		return fmt.Sprintf("n=%d,commands=%d", o.Density, o.IdleCommands)
	}
	return fmt.Sprintf("n=%d", o.Density)
}

func (b *bencher) hold(ctx context.Context, w *workload, m method, round, slot int) (err error) {
	n := b.o.Density
	key := func(phase string) Key {
		return Key{Measure: MeasurePSS, Workload: w.name, Method: m.name(), Phase: phase, Param: pssParam(b.o)}
	}
	before, selfBefore := cgroup.MemAvailable(), pssOf(os.Getpid())
	var tasks []liveTask
	defer func() {
		for _, t := range tasks {
			err = errors.Join(err, t.close())
		}
	}()
	for i := range n {
		t, err := m.create(ctx, i)
		if err != nil {
			return fmt.Errorf("after %d tasks: %w", i, err)
		}
		tasks = append(tasks, t)
		if err := t.run(ctx, "true"); err != nil {
			return fmt.Errorf("task %d: %w", i, err)
		}
		for range b.o.IdleCommands {
			if err := t.run(ctx, idleCommand); err != nil {
				return fmt.Errorf("task %d: %w", i, err)
			}
		}
	}
	time.Sleep(b.o.Idle) // exited helpers reaped, and what waiting costs shown
	for _, t := range tasks {
		tree, top := treePSS(t.pids())
		if tree == 0 {
			return fmt.Errorf("no processes found for a live task (pids %v)", t.pids())
		}
		b.add(Sample{Key: key(PhasePSS), Round: round, Slot: slot, Value: float64(tree), Unit: UnitBytes},
			Sample{Key: key(PhaseTop), Round: round, Slot: slot, Value: float64(top), Unit: UnitBytes})
	}
	b.add(Sample{Key: key(PhaseMemAvail), Round: round, Slot: slot, Value: float64(before-cgroup.MemAvailable()) / float64(n), Unit: UnitBytes})
	if m.name() == MethodMSB {
		b.add(Sample{Key: key(PhaseHost), Round: round, Slot: slot, Value: float64(pssOf(os.Getpid())-selfBefore) / float64(n), Unit: UnitBytes})
	}
	return nil
}
