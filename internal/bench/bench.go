package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/client"
	"github.com/minisandbox/msb/internal/sandbox"
)

// Options choose what a run measures and how much.
type Options struct {
	// Work holds what later runs reuse: generated and real workloads'
	// msb caches, the paper's tarballs, podman's storage and base rootfs.
	Work string
	// Measures to run (default AllMeasures) on Workloads (default bare,
	// synthetic and the real one when Real.Source is set), with Methods
	// (default all: msb, paper, podman, and raw and msb-host in round trips).
	Measures  []string
	Workloads []string
	Methods   []string
	// Rounds of the ready comparison (after Warmup rounds not recorded);
	// Cold adds a cold trial before each warm one.
	Rounds, Warmup int
	Cold           bool
	// Instances each repository workload's ready and throughput tasks
	// cycle through; DiskNs the task counts of the disk measure (the
	// largest sets how many instances are built).
	Instances int
	DiskNs    []int
	// Throughput: worker counts, and the time each method runs with each,
	// split over ThroughputRounds interleaved slices.
	Workers          []int
	Duration         time.Duration
	ThroughputRounds int
	// RoundTrips per method (podman exec: at most PodmanRoundTrips).
	RoundTrips, PodmanRoundTrips int
	// Density is the number of idle tasks held at once for the PSS measure,
	// Idle how long they sit idle before their memory is read (what a
	// process allocates while it waits shows only over time).
	Density int
	Idle    time.Duration
	// IdleCommands is how many commands (idleCommand) each of those tasks
	// runs after its first before it sits idle: an agent's sandbox between
	// two steps has run commands, and what they allocated may stay.
	IdleCommands int
	// PrepInstances is how many instances the first-time preparation
	// measure prepares from nothing (the first builds the environment).
	PrepInstances int
	// Synthetic repository shape.
	Files, FileSize int
	// Real is the real repository workload.
	Real RealRepo
	// Python builds the environments (default /usr/bin/python3, which the
	// paper's chroot and podman's Debian base image have at the same path).
	Python string
	// Podman: whether to compare with podman, and the base image's root
	// filesystem (default: debootstrap into Work).
	Podman       bool
	PodmanRootfs string
	// MSB is the msb binary the process measure runs (default: msb next
	// to this executable, else on PATH), with MSBArgs (global flags such
	// as --state-dir) before `run -- true`.
	MSB     string
	MSBArgs []string
	// API adds msb-api to the throughput measure of the bare workload:
	// the daemon of the MSB binary (msb serve, with a state dir beside
	// this run's and a cache in Work) creating, answering and deleting
	// through its API. APIOpenSession opens each task's session with a
	// request of its own, for a daemon whose create cannot.
	API            bool
	APIOpenSession bool
	Logger         *slog.Logger `json:"-"`
	// Progress, when set, receives one line per step.
	Progress func(string) `json:"-"`
}

// AllMeasures in the order a run takes them.
var AllMeasures = []string{MeasureReady, MeasureProcess, MeasureThroughput, MeasureRoundTrip, MeasurePSS, MeasureDisk, MeasurePrep}

// Defaults fills zero fields.
func (o *Options) Defaults() {
	if len(o.Measures) == 0 {
		o.Measures = AllMeasures
	}
	if o.Rounds == 0 {
		o.Rounds = 20
	}
	if o.Instances == 0 {
		o.Instances = 10
	}
	if len(o.DiskNs) == 0 {
		o.DiskNs = []int{1, 10, 50}
	}
	if len(o.Workers) == 0 {
		o.Workers = []int{1, 2}
	}
	if o.Duration == 0 {
		o.Duration = 6 * time.Second
	}
	if o.ThroughputRounds == 0 {
		o.ThroughputRounds = 3
	}
	if o.RoundTrips == 0 {
		o.RoundTrips = 500
	}
	if o.PodmanRoundTrips == 0 {
		o.PodmanRoundTrips = 50
	}
	if o.Density == 0 {
		o.Density = 200
	}
	if o.Idle == 0 {
		o.Idle = 10 * time.Second
	}
	if o.PrepInstances == 0 {
		o.PrepInstances = 3
	}
	if o.Files == 0 {
		o.Files = 2000
	}
	if o.FileSize == 0 {
		o.FileSize = 4096
	}
	if o.Real.Repo == "" {
		src := o.Real.Source
		o.Real = Requests
		o.Real.Source = src
	}
	if o.Python == "" {
		o.Python = "/usr/bin/python3"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// ErrOptions marks options a run cannot use.
var ErrOptions = errors.New("bench options")

// Methods are the methods a run can compare.
var Methods = []string{MethodMSB, MethodMSBSpare, MethodMSBAPI, MethodPaper, MethodPodman, MethodRaw, MethodMSBHost}

func (o *Options) check() error {
	if o.Work == "" {
		return fmt.Errorf("%w: no work dir", ErrOptions)
	}
	for _, m := range o.Measures {
		if !slices.Contains(AllMeasures, m) {
			return fmt.Errorf("%w: unknown measure %q (%s)", ErrOptions, m, strings.Join(AllMeasures, ", "))
		}
	}
	for _, m := range o.Methods {
		if !slices.Contains(Methods, m) {
			return fmt.Errorf("%w: unknown method %q (%s)", ErrOptions, m, strings.Join(Methods, ", "))
		}
	}
	if o.Rounds < 1 || o.Warmup < 0 || o.ThroughputRounds < 1 || o.Duration <= 0 || o.RoundTrips < 1 || o.Density < 1 || o.Idle < 0 || o.IdleCommands < 0 || o.PrepInstances < 1 || o.Instances < 1 {
		return fmt.Errorf("%w: rounds, slices, duration, round trips, density, instances and prep instances must be positive (warmup and idle at least 0)", ErrOptions)
	}
	for _, n := range o.DiskNs {
		if n < 1 {
			return fmt.Errorf("%w: disk N %d is not positive", ErrOptions, n)
		}
	}
	for _, n := range o.Workers {
		if n < 1 {
			return fmt.Errorf("%w: worker count %d is not positive", ErrOptions, n)
		}
	}
	return nil
}

// bencher is one run.
type bencher struct {
	o  Options
	rt *sandbox.Runtime
	pm *podman // nil when podman is skipped
	// api is msb-api's method, its daemon running (nil: not asked for)
	api *apiMethod

	systemBytes map[string]int64 // the disk measure's system parts, counted once

	mu     sync.Mutex // guards report
	report *Report
}

func (b *bencher) add(s ...Sample) {
	b.mu.Lock()
	b.report.Samples = append(b.report.Samples, s...)
	b.mu.Unlock()
}

// Kinds of notes.
const (
	noteInfo    = "note"    // a condition of the run the reader must know
	noteSkipped = "skipped" // what could not run on this host, and why
	noteFailed  = "failed"  // what failed; the run goes on, the command fails
)

// note records something the reader must know.
func (b *bencher) note(kind, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	b.mu.Lock()
	switch kind {
	case noteFailed:
		b.report.Failures = append(b.report.Failures, msg)
	case noteSkipped:
		b.report.Skipped = append(b.report.Skipped, msg)
	default:
		b.report.Notes = append(b.report.Notes, msg)
	}
	b.mu.Unlock()
	b.logf("%s: %s", kind, msg)
}

func (b *bencher) logf(format string, args ...any) {
	if b.o.Progress != nil {
		b.o.Progress(fmt.Sprintf(format, args...))
	}
}

func (b *bencher) wants(measure string) bool { return slices.Contains(b.o.Measures, measure) }

// uses reports whether the run compares method.
func (b *bencher) uses(method string) bool {
	return len(b.o.Methods) == 0 || slices.Contains(b.o.Methods, method)
}

// Run runs the measures of o with rt and returns the report; a method that
// fails is reported in Report.Failures and the rest goes on.
func Run(ctx context.Context, rt *sandbox.Runtime, o Options) (*Report, error) {
	o.Defaults()
	if err := o.check(); err != nil {
		return nil, err
	}
	work, err := filepath.Abs(o.Work)
	if err != nil {
		return nil, err
	}
	o.Work = work
	for _, d := range []string{o.Work, filepath.Join(o.Work, "tasks")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	// msb's sandboxes as the engine makes them: with its network
	// namespaces made ahead.
	if err := rt.SetNetSpares(sandbox.EngineNetSpares); err != nil {
		return nil, err
	}
	b := &bencher{o: o, rt: rt, report: newReport(rt, o)}
	b.preflight(ctx)
	if stop := b.startAPI(ctx); stop != nil {
		defer stop()
	}
	workloads := b.workloads(ctx)
	for _, m := range AllMeasures {
		if !b.wants(m) {
			continue
		}
		for _, w := range workloads {
			if err := ctx.Err(); err != nil {
				return b.finish(), err
			}
			b.measure(ctx, m, w)
		}
	}
	return b.finish(), nil
}

func (b *bencher) finish() *Report {
	b.report.Finished = time.Now()
	b.report.Machine.LoadEnd = loadAvg()
	return b.report
}

// measure runs one measure on one workload, if it applies (round trips,
// PSS and whole processes on the bare workload, disk and preparation on
// repositories), sampling the machine's load while it runs.
func (b *bencher) measure(ctx context.Context, m string, w *workload) {
	run := map[string]func(context.Context, *workload){
		MeasureReady: b.ready, MeasureProcess: b.process, MeasureThroughput: b.throughput, MeasureRoundTrip: b.roundTrips,
		MeasurePSS: b.density, MeasureDisk: b.disk, MeasurePrep: b.prep,
	}[m]
	switch m {
	case MeasureRoundTrip, MeasurePSS, MeasureProcess:
		if !w.bare() {
			return
		}
	case MeasureDisk, MeasurePrep:
		if w.bare() {
			return
		}
	}
	b.logf("%s: %s", m, w.name)
	stop := b.sampleLoad(m, w.name)
	defer stop()
	run(ctx, w)
}

// preflight finds what this host lacks for the baselines and says so.
func (b *bencher) preflight(ctx context.Context) {
	if !b.o.Podman || !b.uses(MethodPodman) {
		b.note(noteSkipped, "podman: not asked for (--podman=false or --methods)")
		return
	}
	pm, err := newPodman(ctx, filepath.Join(b.o.Work, "podman"))
	if err == nil {
		b.report.Machine.Podman = pm.version + " (" + pm.runtime + ", cgroupfs)"
		if err = b.setupPodmanBase(ctx, pm); err == nil {
			b.pm = pm
			return
		}
	}
	if errors.Is(err, errSkipped) {
		b.note(noteSkipped, "podman: %v", err)
	} else {
		b.note(noteFailed, "podman setup: %v", err)
	}
}

// startAPI starts msb-api's daemon when the run asks for it, and returns
// what stops it (nil: none started; a failure is noted).
func (b *bencher) startAPI(ctx context.Context) (stop func()) {
	if !b.o.API || !b.uses(MethodMSBAPI) {
		return nil
	}
	exe, err := b.msbBinary()
	if err != nil {
		b.note(noteSkipped, "msb-api: %v", err)
		return nil
	}
	state := b.rt.StateDir() + "-api"
	d, err := startServe(ctx, APIOptions{Exe: exe, StateDir: state,
		ServeArgs: []string{"--cache", filepath.Join(b.o.Work, "api-cache")}})
	if err != nil {
		b.note(noteFailed, "msb-api: %v", err)
		return nil
	}
	c, err := client.New("unix://"+d.sock, "")
	if err != nil {
		d.stop()
		b.note(noteFailed, "msb-api: %v", err)
		return nil
	}
	b.api = &apiMethod{d: d, c: c, openSession: b.o.APIOpenSession}
	return func() {
		c.Close()
		if err := d.stop(); err != nil {
			b.note(noteFailed, "msb-api: msb serve: %v: %s", err, firstLines(d.log.String()))
		}
	}
}

// workloads prepares every asked-for workload for every method; a
// workload that cannot be prepared is reported and left out.
func (b *bencher) workloads(ctx context.Context) []*workload {
	names := b.o.Workloads
	if len(names) == 0 {
		names = []string{WorkloadBare, WorkloadSynthetic, "real"}
	}
	maxN := slices.Max(append([]int{b.o.Instances, b.o.PrepInstances}, b.o.DiskNs...))
	var out []*workload
	for _, n := range names {
		var w *workload
		var err error
		switch n {
		case WorkloadBare:
			w = bareWorkload()
		case WorkloadSynthetic:
			w, err = syntheticWorkload(filepath.Join(b.o.Work, "synthetic"), b.o.Files, b.o.FileSize, maxN)
		case "real", b.o.Real.name():
			w, err = realWorkload(ctx, b.o.Real, maxN)
		default:
			err = fmt.Errorf("unknown workload %q (bare, synthetic, real)", n)
		}
		if err == nil && !w.bare() {
			b.logf("setup: %s (%d instances)", w.name, len(w.insts))
			err = b.setup(ctx, w)
		}
		switch {
		case errors.Is(err, errSkipped):
			b.note(noteSkipped, "workload %s: %v", n, err)
		case err != nil:
			b.note(noteFailed, "workload %s: %v", n, err)
		default:
			out = append(out, w)
			b.report.Workloads = append(b.report.Workloads, w.describe())
		}
	}
	return out
}

func (b *bencher) setup(ctx context.Context, w *workload) error {
	if err := b.setupMSB(ctx, w); err != nil {
		return fmt.Errorf("msb: %w", err)
	}
	if err := b.setupPaper(w); err != nil {
		return fmt.Errorf("paper: %w", err)
	}
	if b.pm != nil {
		if err := b.setupPodman(ctx, w); err != nil {
			b.note(noteFailed, "podman images for %s: %v", w.name, err)
		} else {
			w.podmanReady = true
		}
	}
	return nil
}

// methods are the methods of a workload's comparison; session makes
// msb's and podman's tasks run their commands in a shell each task keeps,
// as the paper's always does: one criterion of an answer for every method.
func (b *bencher) methods(w *workload, session bool) []method {
	ms := []method{&msbMethod{rt: b.rt, wl: w, session: session}, &paperMethod{wl: w, tasks: b.tasksDir(), rootless: b.rt.Rootless()}}
	if b.pm != nil && (w.bare() || w.podmanReady) {
		ms = append(ms, &podmanMethod{pm: b.pm, wl: w, session: session})
	}
	return slices.DeleteFunc(ms, func(m method) bool { return !b.uses(m.name()) })
}

// tasksDir is where the paper's task dirs are made.
func (b *bencher) tasksDir() string { return filepath.Join(b.o.Work, "tasks") }
