package bench

import (
	"context"
	"fmt"
	"os/exec"
	"time"

	"github.com/minisandbox/msb/internal/session"
)

// Round-trip phases.
const (
	PhaseSession = "session" // a command in a persistent shell
	PhaseExec    = "exec"    // a command in a new shell
)

// tripper runs one command per call, in a shell it keeps open.
type tripper struct {
	method, phase string
	n             int
	open          func(ctx context.Context) (do func(ctx context.Context) error, close func() error, err error)
}

// roundTrips times `true` in a persistent shell (a raw bash on a pipe on
// the host, msb's session protocol on the host, an msb sandbox's session,
// the paper's chroot shell, a shell kept in a podman container) and in a
// new shell per command (bash -c on the host, msb's Exec, podman exec),
// in interleaved batches.
func (b *bencher) roundTrips(ctx context.Context, w *workload) {
	n := b.o.RoundTrips
	inTask := func(m method) func(ctx context.Context) (func(context.Context) error, func() error, error) {
		return func(ctx context.Context) (func(context.Context) error, func() error, error) {
			t, err := m.create(ctx, 0)
			if err != nil {
				return nil, nil, err
			}
			return func(ctx context.Context) error { return t.run(ctx, "true") }, t.close, nil
		}
	}
	trippers := []tripper{
		{MethodRaw, PhaseSession, n, openRawShell},
		{MethodMSBHost, PhaseSession, n, openHostSession},
		{MethodMSB, PhaseSession, n, inTask(&msbMethod{rt: b.rt, wl: w, session: true})},
		{MethodPaper, PhaseSession, n, inTask(&paperMethod{wl: w, tasks: b.tasksDir(), rootless: b.rt.Rootless()})},
		{MethodRaw, PhaseExec, n, openRawExec},
		{MethodMSB, PhaseExec, n, inTask(&msbMethod{rt: b.rt, wl: w})},
	}
	if b.pm != nil {
		trippers = append(trippers, tripper{MethodPodman, PhaseSession, n, inTask(&podmanMethod{pm: b.pm, wl: w, session: true})},
			tripper{MethodPodman, PhaseExec, min(n, b.o.PodmanRoundTrips), inTask(&podmanMethod{pm: b.pm, wl: w})})
	}
	for _, phase := range []string{PhaseSession, PhaseExec} {
		var ts []tripper
		var names []string
		for _, t := range trippers {
			if t.phase == phase && b.uses(t.method) {
				ts, names = append(ts, t), append(names, t.method)
			}
		}
		b.tripBatches(ctx, w, phase, ts, names)
	}
}

// tripBatches opens every tripper's shell (and runs a first command in
// it, whose start-up cost is not a round trip), then runs 10 interleaved
// batches of each one's round trips, then closes them.
func (b *bencher) tripBatches(ctx context.Context, w *workload, phase string, ts []tripper, names []string) {
	const rounds = 10
	type open struct {
		do    func(context.Context) error
		close func() error
		n     int
	}
	opened := map[string]open{}
	defer func() {
		for name, o := range opened {
			if err := o.close(); err != nil {
				b.note(noteFailed, "roundtrip %s %s: closing: %v", phase, name, err)
			}
		}
	}()
	var live []string
	for _, t := range ts {
		do, cl, err := t.open(ctx)
		if err != nil {
			b.note(noteFailed, "roundtrip %s %s: %v", phase, t.method, err)
			continue
		}
		opened[t.method] = open{do, cl, t.n}
		live = append(live, t.method)
		if err := do(ctx); err != nil {
			b.note(noteFailed, "roundtrip %s %s: first command: %v", phase, t.method, err)
		}
	}
	failed := interleave(ctx, rounds, 0, live, func(ctx context.Context, round, slot int, name string) error {
		o := opened[name]
		batch := max(1, o.n/rounds)
		for range batch {
			t0 := time.Now()
			if err := o.do(ctx); err != nil {
				return err
			}
			b.add(Sample{Key: Key{Measure: MeasureRoundTrip, Workload: w.name, Method: name, Phase: phase, Cache: Warm},
				Round: round, Slot: slot, Value: time.Since(t0).Seconds(), Unit: UnitSeconds})
		}
		return nil
	})
	b.failures(MeasureRoundTrip+" "+phase, w, failed)
}

// openRawShell is bash on a pipe on the host: the floor of any session.
func openRawShell(ctx context.Context) (func(context.Context) error, func() error, error) {
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Env = taskEnv()
	cmd.Dir = "/"
	sh, err := startPipeShell(cmd)
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context) error { return sh.run(ctx, "true") }, sh.close, nil
}

// openHostSession is msb's session protocol (framing, status, output
// capture) over a bash on the host, without a sandbox.
func openHostSession(ctx context.Context) (func(context.Context) error, func() error, error) {
	s, err := session.Start(ctx, "bench", session.Options{Env: taskEnv(), Dir: "/"})
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context) error {
		res, err := s.Exec(ctx, session.ExecRequest{Command: "true", Timeout: commandTimeout})
		if err == nil && res.ExitCode != 0 {
			err = exitError(res.ExitCode, res.Output)
		}
		return err
	}, s.Close, nil
}

// openRawExec is bash -c per command on the host: the floor of one-shot
// execution.
func openRawExec(ctx context.Context) (func(context.Context) error, func() error, error) {
	return func(ctx context.Context) error {
		cmd := exec.CommandContext(ctx, "bash", "-c", "true")
		cmd.Env = taskEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("bash -c true: %w: %s", err, out)
		}
		return nil
	}, func() error { return nil }, nil
}
