package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/minisandbox/msb/internal/sandbox"
)

// Cache states of a trial.
const (
	Warm = "warm"
	Cold = "cold"
)

// ready times, per round and method, one task's life: create (the task
// made and its shell asked for: msb's Prepare lookup, sandbox up and
// session opened; the paper's tarballs extracted and its shell started;
// podman run -d returned and podman exec -i of its shell started), answer
// (the first command, `cd /testbed` or `true`, written to the shell the
// task keeps and its status read back, for every method alike: what is
// left of the shell's start falls here), task (the real task's first
// command: git rev-parse HEAD and the import of the package under test),
// close (everything removed: msb's background cleanup awaited, the
// paper's rm -rf, podman rm -f). ready = create + answer is what
// an agent waits for; cycle is all of it. With Cold, each round first runs
// a cold trial (the method's own files dropped from the page cache, and
// how much of them stayed resident recorded) and then a warm one on the
// same instance. msb-spare's task is made before its trial (untimed; an
// aheadMaker), and before the drop, as a daemon makes its spares ahead:
// the spare's processes map the sandbox binary, which stays resident (the
// resident row says how much).
func (b *bencher) ready(ctx context.Context, w *workload) {
	ms, closeSpare := b.readyMethods(w)
	defer closeSpare()
	caches := []string{Warm}
	if b.o.Cold {
		caches = []string{Cold, Warm}
		b.checkDrop(ctx, w, ms)
	}
	byName, names := index(ms)
	failed := interleave(ctx, b.o.Rounds, b.o.Warmup, names, func(ctx context.Context, round, slot int, name string) error {
		m := byName[name]
		for _, c := range caches {
			i := max(round, 0)
			if a, ok := m.(aheadMaker); ok {
				if err := a.makeAhead(ctx, i); err != nil {
					return err
				}
			}
			if c == Cold {
				files := func(ctx context.Context) ([]string, error) { return m.files(ctx, i) }
				if err := b.dropFor(ctx, w, MeasureReady, name, round, slot, files); err != nil {
					return err
				}
			}
			l, err := lifeOf(ctx, m, i, w.answer, w.task)
			if err != nil {
				return err
			}
			if round < 0 {
				continue
			}
			for _, p := range l.phases(w.task != "") {
				b.add(Sample{Key: Key{Measure: MeasureReady, Workload: w.name, Method: name, Phase: p.phase, Cache: c},
					Round: round, Slot: slot, Value: p.d.Seconds(), Unit: UnitSeconds})
			}
		}
		return nil
	})
	b.failures(MeasureReady, w, failed)
}

// readyMethods are the ready measure's methods, each answering through
// the shell its task keeps, and msb-spare's; close closes a spare left.
func (b *bencher) readyMethods(w *workload) (ms []method, close func() error) {
	ms = b.methods(w, true)
	if !b.uses(MethodMSBSpare) {
		return ms, func() error { return nil }
	}
	sp := &spareMethod{inner: &msbMethod{rt: b.rt, wl: w, session: true}}
	return append(ms, sp), sp.close
}

// aheadMaker is a method that makes task i ahead of its trial (untimed).
type aheadMaker interface {
	makeAhead(ctx context.Context, i int) error
}

// life is how long the steps of a task's life took; detail holds the
// method's own breakdown, where it has one (see phased).
type life struct {
	create, answer, task, close time.Duration
	detail                      []phaseTime
}

// phased is a liveTask that times its own steps (msb: sandbox.Timings).
type phased interface {
	// phaseTimes, called after close, waits for what close left to the
	// background and returns the phases of create, close and that.
	phaseTimes() []phaseTime
}

type phaseTime struct {
	phase string
	d     time.Duration
}

// phases are the ready measure's phases of l.
func (l life) phases(task bool) []phaseTime {
	ps := []phaseTime{{"create", l.create}, {"answer", l.answer}, {"ready", l.create + l.answer}}
	if task {
		ps = append(ps, phaseTime{"task", l.task})
	}
	ps = append(ps, phaseTime{"close", l.close}, phaseTime{"cycle", l.create + l.answer + l.task + l.close})
	return append(ps, l.detail...)
}

// lifeOf creates task i of m, runs answer and then task (unless "") in it
// and closes it.
func lifeOf(ctx context.Context, m method, i int, answer, task string) (life, error) {
	var l life
	t0 := time.Now()
	t, err := m.create(ctx, i)
	if err != nil {
		return l, fmt.Errorf("create: %w", err)
	}
	t1 := time.Now()
	err = t.run(ctx, answer)
	t2 := time.Now()
	if err == nil && task != "" {
		err = t.run(ctx, task)
	}
	t3 := time.Now()
	cerr := t.close()
	t4 := time.Now()
	if err := errors.Join(err, cerr); err != nil {
		return l, err
	}
	l = life{create: t1.Sub(t0), answer: t2.Sub(t1), task: t3.Sub(t2), close: t4.Sub(t3)}
	if p, ok := t.(phased); ok {
		l.detail = p.phaseTimes()
	}
	return l, nil
}

// PhaseResident is, in a cold trial, how many bytes of the method's own
// files were still in the page cache right after the drop: pages that
// running processes map cannot be dropped (msb-spare's spare, made ahead,
// maps the sandbox binary), and this says how cold the trial really was.
const PhaseResident = "resident"

// dropFor evicts the page cache of the files of a method's cold trial and
// records how much of them stayed resident (PhaseResident).
func (b *bencher) dropFor(ctx context.Context, w *workload, measure, method string, round, slot int, files func(context.Context) ([]string, error)) error {
	fs, err := files(ctx)
	if err != nil {
		return err
	}
	if _, err := DropCache(ctx, fs); err != nil {
		return err
	}
	st, err := Resident(ctx, fs)
	if err != nil {
		return err
	}
	if round >= 0 {
		b.add(Sample{Key: Key{Measure: measure, Workload: w.name, Method: method, Phase: PhaseResident, Cache: Cold},
			Round: round, Slot: slot, Value: float64(st.Resident), Unit: UnitBytes})
	}
	return nil
}

// checkDrop drops each method's files of task 0 once and notes how much
// stayed resident: the evidence that a cold trial is cold.
func (b *bencher) checkDrop(ctx context.Context, w *workload, ms []method) {
	if self, err := os.Executable(); err == nil && sameFile(self, b.rt.Exe()) {
		b.note(noteInfo, "msb's sandbox binary is this benchmark's own executable (%s, no %s beside it): its pages are mapped, so no cold trial can drop them (make build puts %s beside it)",
			self, sandbox.InitBinary, sandbox.InitBinary)
	}
	for _, m := range ms {
		fs, err := m.files(ctx, 0)
		if err == nil {
			_, err = DropCache(ctx, fs)
		}
		var st CacheStat
		if err == nil {
			st, err = Resident(ctx, fs)
		}
		if err != nil {
			b.note(noteFailed, "dropping the page cache of %s's files: %v", m.name(), err)
			continue
		}
		b.note(noteInfo, "cold trials of %s, %s: its own files of a task: %d files, %.1f MiB; %.2f MiB resident right after the drop (pages mapped by running processes stay)",
			w.name, m.name(), st.Files, mib(st.Bytes), mib(st.Resident))
	}
}

// sameFile reports whether paths a and b name the same file.
func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func index(ms []method) (map[string]method, []string) {
	by := map[string]method{}
	var names []string
	for _, m := range ms {
		by[m.name()] = m
		names = append(names, m.name())
	}
	return by, names
}

// failures records the methods that failed in a measure.
func (b *bencher) failures(measure string, w *workload, failed map[string]error) {
	for m, err := range failed {
		b.note(noteFailed, "%s %s %s: %v", measure, w.name, m, err)
	}
}
