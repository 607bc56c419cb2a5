package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/warm"
	"golang.org/x/sys/unix"
)

// The fork comparison (`msb bench fork`) measures what branching a live
// sandbox costs, through the engine as the daemon does it: a snapshot of
// what a sandbox wrote, a fork into children until each child's first
// command has answered, a rollback, and what an idle child holds in memory
// and on disk. Its baseline is podman doing the same with the tools it
// has: `podman commit` of a container and `podman run` of the image.
//
// A parent is a raw sandbox of the host's system dirs (podman: a
// container of the base image) with a session "main" whose shell has
// moved to /bench and exported a variable; then it writes the round's
// bytes as files of 1 MiB of random data (no two rounds alike, so no
// round is served by dedup against an earlier one) under /bench/data.

// MeasureFork is the fork comparison's measure.
const MeasureFork = "fork"

// Phases of the fork measure.
const (
	PhaseSnapshot = "snapshot" // the snapshot call (podman commit); Param written=SIZE
	PhaseFork     = "fork"     // fork called → this child's first command answered, per child; Param children=N
	PhaseForkAll  = "fork-all" // fork called → every child's first command answered; Param children=N
	PhaseRollback = "rollback" // the rollback call; Param written=SIZE
	PhaseForkPSS  = "fork-pss" // PSS of an idle child's processes (supervisor and shells; podman: conmon and bash)
	PhaseForkDisk = "fork-disk"
)

// LargeSize is the snapshot size from which a comparison runs
// ForkOptions.LargeRounds rounds: a round of 1 GiB takes a minute here.
const LargeSize = 256 << 20

// ForkOptions size the fork comparison.
type ForkOptions struct {
	// Work holds the engine's cache of snapshots and podman's storage.
	Work string
	// Sizes are the bytes a parent writes before it is snapshotted, one
	// comparison each (default 8 MiB, 100 MiB, 1 GiB).
	Sizes []int64
	// Rounds of each comparison after Warmup rounds not recorded;
	// LargeRounds those of the large ones: a snapshot of LargeSize or
	// more, the fork into Children children.
	Rounds, Warmup, LargeRounds int
	Children                    int
	// ForkBytes is what a parent writes before it is forked (default 0:
	// the fork's snapshot then commits a near-empty writable layer).
	ForkBytes int64
	// RollbackBytes is what the sandbox writes before it is rolled back
	// (default 8 MiB).
	RollbackBytes int64
	// Idle is how long the children sit idle before their memory is read.
	Idle time.Duration
	// Spares is the engine's warm pool (engine.Config.Spares, default 0:
	// none). With spares, a fork's children are taken from the spares of
	// their shape the previous fork left to be made (root mode: reset
	// onto the snapshot), and the notes give the pool's hits and misses.
	Spares int
	// ReadySpares, with Spares, has each fork wait (untimed, up to
	// spareWait) until the pool holds a spare per child: the time of a
	// fork served from spares, as between an agent's steps, not of rounds
	// that come faster than the pool refills.
	ReadySpares bool
	// Podman: compare with podman commit + run (skipped, and said so,
	// when podman is not installed); PodmanRootfs as in Options.
	Podman       bool
	PodmanRootfs string
	Logger       *slog.Logger `json:"-"`
	Progress     func(string) `json:"-"`
}

func (o *ForkOptions) defaults() {
	if len(o.Sizes) == 0 {
		o.Sizes = []int64{8 << 20, 100 << 20, 1 << 30}
	}
	if o.Rounds == 0 {
		o.Rounds = 10
	}
	if o.LargeRounds == 0 {
		o.LargeRounds = 3
	}
	if o.Children == 0 {
		o.Children = 32
	}
	if o.RollbackBytes == 0 {
		o.RollbackBytes = 8 << 20
	}
	if o.Idle == 0 {
		o.Idle = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

func (o *ForkOptions) check() error {
	if o.Work == "" {
		return fmt.Errorf("%w: no work dir", ErrOptions)
	}
	if o.Rounds < 1 || o.LargeRounds < 1 || o.Warmup < 0 || o.Idle < 0 || o.RollbackBytes < 0 || o.ForkBytes < 0 || o.Spares < 0 {
		return fmt.Errorf("%w: rounds must be positive (warmup, idle, spares, fork and rollback bytes at least 0)", ErrOptions)
	}
	if o.Children < 1 || o.Children > engine.MaxForkCount {
		return fmt.Errorf("%w: children %d: give 1 to %d", ErrOptions, o.Children, engine.MaxForkCount)
	}
	for _, s := range o.Sizes {
		if s < 0 {
			return fmt.Errorf("%w: snapshot size %d is negative", ErrOptions, s)
		}
	}
	return nil
}

// Fork runs the fork comparison with an engine opened from cfg (its cache
// replaced by one in the work dir, admission by memory off: the
// comparison measures forks, not waiting for room) and returns the report.
func Fork(ctx context.Context, cfg engine.Config, o ForkOptions) (*Report, error) {
	o.defaults()
	if err := o.check(); err != nil {
		return nil, err
	}
	work, err := filepath.Abs(o.Work)
	if err != nil {
		return nil, err
	}
	o.Work = work
	if err := os.MkdirAll(filepath.Join(work, "fork"), 0o755); err != nil {
		return nil, err
	}
	cfg.Cache = engine.CacheConfig{Dir: filepath.Join(work, "fork", "cache")}
	cfg.MemoryBudget, cfg.Logger, cfg.Spares = -1, o.Logger, o.Spares
	e, err := engine.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening the engine: %w", err)
	}
	defer e.Close()
	b := &bencher{o: Options{Work: work, Measures: []string{MeasureFork}, Workloads: []string{WorkloadBare}, Rounds: o.Rounds,
		Warmup: o.Warmup, Podman: o.Podman, PodmanRootfs: o.PodmanRootfs, Logger: o.Logger, Progress: o.Progress}}
	b.report = forkReport(e, o)
	b.preflight(ctx)
	f := &forker{b: b, e: e, o: o, state: stateDir(cfg)}
	f.run(ctx)
	if o.Spares > 0 {
		st := e.PoolStats()[engine.PoolFork]
		ready := ""
		if o.ReadySpares {
			ready = fmt.Sprintf("; each fork waited, untimed, up to %s for its spares (--ready-spares): %d did not get them all", spareWait, f.unready)
		}
		b.report.Notes = append(b.report.Notes, fmt.Sprintf("fork: %d spares (--spares%s): children taken from spares %d, started %d; spares made %d, failed %d, closed to make room %d, expired %d",
			o.Spares, ready, st.Hits, st.Misses, st.Made, st.Failed, st.Evicted+st.Shed, st.Expired))
	}
	return b.finish(), ctx.Err()
}

// forkReport is a Report of the engine's host.
func forkReport(e *engine.Engine, o ForkOptions) *Report {
	var u unix.Utsname
	unix.Uname(&u)
	m := Machine{Kernel: unix.ByteSliceToString(u.Release[:]), CPU: cpuModel(), CPUs: runtime.NumCPU(), MemTotal: memTotal(),
		Mode: e.Mode(), Cgroup: "memory: " + e.Enforcement().Memory, Go: runtime.Version(), LoadStart: loadAvg()}
	r := &Report{Started: time.Now(), Machine: m, Options: Options{Measures: []string{MeasureFork}, Rounds: o.Rounds, Warmup: o.Warmup}}
	r.Notes = append(r.Notes, fmt.Sprintf("fork: snapshot sizes %s, %d rounds each (%d from %s); fork into 1 child %d rounds, into %d children %d rounds; rollback at %s, %d rounds; children idle %s before their memory is read; a forked parent wrote %s",
		fmtSizes(o.Sizes), o.Rounds, o.LargeRounds, fmtSize(LargeSize), o.Rounds, o.Children, o.LargeRounds, fmtSize(o.RollbackBytes), o.Rounds, o.Idle, fmtSize(o.ForkBytes)))
	return r
}

// stateDir is where cfg's engine keeps its sandboxes' state.
func stateDir(cfg engine.Config) string {
	if cfg.StateDir != "" {
		return cfg.StateDir
	}
	return sandbox.DefaultStateDir(os.Getenv("XDG_RUNTIME_DIR"))
}

// forker is one run of the fork comparison.
type forker struct {
	b     *bencher
	e     *engine.Engine
	o     ForkOptions
	state string
	seq   int // names snapshots and images
	// unready counts the forks whose spares were not ready within
	// spareWait (ReadySpares): they ran anyway, some children started.
	unready int
}

func (f *forker) methods() []string {
	ms := []string{MethodMSB}
	if f.b.pm != nil {
		ms = append(ms, MethodPodman)
	}
	return ms
}

func (f *forker) run(ctx context.Context) {
	for _, size := range f.o.Sizes {
		rounds := f.o.Rounds
		if size >= LargeSize {
			rounds = f.o.LargeRounds
		}
		f.compare(ctx, "snapshot "+fmtSize(size), rounds, f.methods(), func(ctx context.Context, round, slot int, m string) error {
			return f.snapshotTrial(ctx, m, size, round, slot)
		})
	}
	for _, n := range []int{1, f.o.Children} {
		rounds := f.o.Rounds
		if n > 1 {
			rounds = f.o.LargeRounds
		}
		f.compare(ctx, fmt.Sprintf("fork into %d", n), rounds, f.methods(), func(ctx context.Context, round, slot int, m string) error {
			return f.forkTrial(ctx, m, n, round, slot)
		})
		if n == f.o.Children {
			break // Children 1: one comparison
		}
	}
	f.compare(ctx, "rollback", f.o.Rounds, []string{MethodMSB}, func(ctx context.Context, round, slot int, m string) error {
		return f.rollbackTrial(ctx, round, slot)
	})
}

// compare runs one interleaved comparison and reports what failed; msb's
// ErrSnapshotUnsupported (a rootless host without a reachable writable
// layer or a freezer) is reported as skipped, with the reason.
func (f *forker) compare(ctx context.Context, what string, rounds int, methods []string, trial func(ctx context.Context, round, slot int, m string) error) {
	f.b.logf("fork: %s (%s)", what, fmt.Sprint(methods))
	failed := interleave(ctx, rounds, f.o.Warmup, methods, trial)
	// The deleted snapshots' layers (a GiB each at the largest size) go
	// now, not when the work dir is next collected.
	if _, err := f.e.Cache().GC(ctx); err != nil && ctx.Err() == nil {
		f.b.note(noteFailed, "%s %s: gc of the snapshots' layers: %v", MeasureFork, what, err)
	}
	for m, err := range failed {
		kind := noteFailed
		if errors.Is(err, engine.ErrSnapshotUnsupported) {
			kind = noteSkipped
		}
		f.b.note(kind, "%s %s %s: %v", MeasureFork, what, m, err)
	}
}

func (f *forker) add(m, phase, param string, round, slot int, v float64, unit string) {
	if round < 0 {
		return // warm-up
	}
	f.b.add(Sample{Key: Key{Measure: MeasureFork, Workload: WorkloadBare, Method: m, Phase: phase, Param: param}, Round: round, Slot: slot, Value: v, Unit: unit})
}

// name is a name no earlier snapshot or image of this run had.
func (f *forker) name(what string) string {
	f.seq++
	return fmt.Sprintf("msb-bench-%s-%d-%d", what, os.Getpid(), f.seq)
}

// writeScript is the bash that makes /bench/data hold size bytes of
// random data in files of 1 MiB (the last one shorter).
func writeScript(dir string, size int64) string {
	const mib = 1 << 20
	return fmt.Sprintf(`mkdir -p %[1]s && cd %[1]s && n=%[2]d && i=0 && while [ $i -lt $n ]; do head -c %[3]d /dev/urandom > f$i || exit 1; i=$((i+1)); done && head -c %[4]d /dev/urandom > tail`,
		dir, size/mib, mib, size%mib)
}

// parentState is what a parent's session does before it writes: the cwd
// and variable a fork carries.
const parentState = "mkdir -p /bench && cd /bench && export BENCH_STEP=1"

// fmtSize writes a size in MiB or GiB, as the Param of a sample.
func fmtSize(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%dGiB", n>>30)
	}
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dB", n)
}

func fmtSizes(ns []int64) string {
	s := ""
	for i, n := range ns {
		if i > 0 {
			s += ", "
		}
		s += fmtSize(n)
	}
	return s
}

// --- msb's side, through the engine ---

// msbParent starts a parent that wrote size bytes.
func (f *forker) msbParent(ctx context.Context, size int64) (*engine.Sandbox, error) {
	disk := max(sandbox.DefaultLimits.DiskBytes, 2*size+(1<<30))
	s, err := f.e.CreateSandbox(ctx, engine.SandboxRequest{HostBase: true, Labels: map[string]string{"msb-bench": "fork"}, Limits: api.Limits{DiskBytes: disk}})
	if err != nil {
		return nil, err
	}
	if err := s.OpenSession(ctx, api.SessionRequest{Name: "main"}); err != nil {
		s.Close()
		return nil, err
	}
	script := []string{parentState}
	if size > 0 {
		script = append(script, writeScript("/bench/data", size)+" && cd /bench")
	}
	for _, c := range script {
		if err := msbRun(ctx, s, c); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// msbRun runs command in s's session main and fails unless it exits 0.
func msbRun(ctx context.Context, s *engine.Sandbox, command string) error {
	res, err := s.Exec(ctx, api.ExecRequest{Session: "main", Command: command, TimeoutNs: int64(10 * time.Minute)})
	if err != nil {
		return fmt.Errorf("sandbox %s: %q: %w", s.ID(), command, err)
	}
	if res.ExitCode != 0 {
		return exitError(res.ExitCode, res.Stdout+res.Stderr)
	}
	return nil
}

func (f *forker) snapshotTrial(ctx context.Context, m string, size int64, round, slot int) error {
	if m == MethodPodman {
		return f.podmanSnapshotTrial(ctx, size, round, slot)
	}
	p, err := f.msbParent(ctx, size)
	if err != nil {
		return err
	}
	defer p.Close()
	name := f.name("snap")
	t0 := time.Now()
	info, err := f.e.Snapshot(ctx, p.ID(), api.SnapshotRequest{Name: name})
	d := time.Since(t0)
	if err != nil {
		return err
	}
	defer f.e.DeleteSnapshot(name)
	if info.Bytes < size {
		return fmt.Errorf("snapshot %s holds %d bytes, the sandbox wrote %d", name, info.Bytes, size)
	}
	f.add(m, PhaseSnapshot, "written="+fmtSize(size), round, slot, d.Seconds(), UnitSeconds)
	return nil
}

// answered runs `true` in each child concurrently and returns, per
// child, the time from t0 until it answered.
func answered(ctx context.Context, t0 time.Time, n int, run func(ctx context.Context, i int) error) ([]time.Duration, error) {
	ds := make([]time.Duration, n)
	errs := make([]error, n)
	done := make(chan struct{})
	for i := range n {
		go func() {
			defer func() { done <- struct{}{} }()
			errs[i] = run(ctx, i)
			ds[i] = time.Since(t0)
		}()
	}
	for range n {
		<-done
	}
	return ds, errors.Join(errs...)
}

// forkSamples records each child's time and the time until all answered.
func (f *forker) forkSamples(m string, ds []time.Duration, round, slot int) {
	param := f.forkParam(len(ds))
	var all time.Duration
	for _, d := range ds {
		f.add(m, PhaseFork, param, round, slot, d.Seconds(), UnitSeconds)
		all = max(all, d)
	}
	if len(ds) > 1 {
		f.add(m, PhaseForkAll, param, round, slot, all.Seconds(), UnitSeconds)
	}
}

func (f *forker) forkTrial(ctx context.Context, m string, n, round, slot int) (err error) {
	if m == MethodPodman {
		return f.podmanForkTrial(ctx, n, round, slot)
	}
	p, err := f.msbParent(ctx, f.o.ForkBytes)
	if err != nil {
		return err
	}
	defer p.Close()
	f.waitSpares(ctx, n)
	t0 := time.Now()
	kids, err := f.e.Fork(ctx, p.ID(), api.ForkRequest{Count: n})
	if err != nil {
		return err
	}
	defer func() {
		for _, k := range kids {
			err = errors.Join(err, k.Close())
		}
	}()
	ds, err := answered(ctx, t0, n, func(ctx context.Context, i int) error {
		// the carried state is checked in the same command
		return msbRun(ctx, kids[i], `[ "$PWD" = /bench ] && [ "$BENCH_STEP" = 1 ]`)
	})
	if err != nil {
		return err
	}
	f.forkSamples(m, ds, round, slot)
	if n == 1 {
		return nil
	}
	return f.msbIdle(ctx, kids, f.forkParam(n), round, slot)
}

// spareWait bounds how long a fork waits for its spares (ReadySpares).
const spareWait = 5 * time.Second

// waitSpares waits, with ReadySpares, until the pool holds a spare for
// each of n children (at most Spares); the first fork finds none to wait
// for: it has the pool make them. The pool keeps as many for a key as the
// last fork asked, so the first fork of a larger size waits in vain: a
// wait past spareWait is logged and counted in unready, which the
// report's notes give.
func (f *forker) waitSpares(ctx context.Context, n int) {
	if !f.o.ReadySpares || f.o.Spares == 0 {
		return
	}
	n = min(n, f.o.Spares)
	var st warm.Stats
	for deadline := time.Now().Add(spareWait); time.Now().Before(deadline) && ctx.Err() == nil; {
		if st = f.e.PoolStats()[engine.PoolFork]; st.Spares >= n || st.Hits+st.Misses == 0 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	if ctx.Err() == nil {
		f.unready++
		f.b.logf("fork: %d of %d spares ready after %s; forking anyway", st.Spares, n, spareWait)
	}
}

// forkParam is the Param of a fork into n children: children=N, and
// written=SIZE when the parent wrote ForkBytes before it.
func (f *forker) forkParam(n int) string {
	if f.o.ForkBytes == 0 {
		return fmt.Sprintf("children=%d", n)
	}
	return fmt.Sprintf("children=%d,written=%s", n, fmtSize(f.o.ForkBytes))
}

// msbIdle records the PSS of each idle child (its supervisor and shells)
// and the bytes its writable layer holds, as a snapshot of it counts them.
func (f *forker) msbIdle(ctx context.Context, kids []*engine.Sandbox, param string, round, slot int) error {
	time.Sleep(f.o.Idle)
	for _, k := range kids {
		pid, err := initPid(f.state, k.ID())
		if err != nil {
			return err
		}
		tree, _ := treePSS([]int{pid})
		if tree == 0 {
			return fmt.Errorf("child %s: no processes found under pid %d", k.ID(), pid)
		}
		f.add(MethodMSB, PhaseForkPSS, param, round, slot, float64(tree), UnitBytes)
	}
	for _, k := range kids {
		name := f.name("idle")
		info, err := f.e.Snapshot(ctx, k.ID(), api.SnapshotRequest{Name: name})
		if err != nil {
			return err
		}
		f.e.DeleteSnapshot(name)
		f.add(MethodMSB, PhaseForkDisk, param, round, slot, float64(info.Bytes), UnitBytes)
	}
	return nil
}

// initPid is the host pid of a sandbox's init (its supervisor), from the
// info.json the runtime keeps in its state dir for gc.
func initPid(state, id string) (int, error) {
	b, err := os.ReadFile(filepath.Join(state, id, "info.json"))
	if err != nil {
		return 0, fmt.Errorf("sandbox %s's pid: %w", id, err)
	}
	var info struct {
		InitPid int `json:"init_pid"`
	}
	if err := json.Unmarshal(b, &info); err != nil || info.InitPid <= 0 {
		return 0, fmt.Errorf("sandbox %s's pid: bad info.json %q: %v", id, b, err)
	}
	return info.InitPid, nil
}

func (f *forker) rollbackTrial(ctx context.Context, round, slot int) error {
	p, err := f.msbParent(ctx, 0)
	if err != nil {
		return err
	}
	defer p.Close()
	name := f.name("base")
	if _, err := f.e.Snapshot(ctx, p.ID(), api.SnapshotRequest{Name: name}); err != nil {
		return err
	}
	defer f.e.DeleteSnapshot(name)
	if err := msbRun(ctx, p, writeScript("/bench/undo", f.o.RollbackBytes)+" && export BENCH_STEP=2"); err != nil {
		return err
	}
	t0 := time.Now()
	_, err = f.e.Rollback(ctx, p.ID(), api.RollbackRequest{Snapshot: name})
	d := time.Since(t0)
	if err != nil {
		return err
	}
	if err := msbRun(ctx, p, `[ ! -e /bench/undo ] && [ "$PWD" = /bench ] && [ "$BENCH_STEP" = 1 ]`); err != nil {
		return fmt.Errorf("after the rollback: %w", err)
	}
	f.add(MethodMSB, PhaseRollback, "written="+fmtSize(f.o.RollbackBytes), round, slot, d.Seconds(), UnitSeconds)
	return nil
}
