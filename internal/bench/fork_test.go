package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
)

// TestWriteScript: a parent's write script, run by bash, leaves exactly
// the asked bytes under its dir, in files of at most 1 MiB.
func TestWriteScript(t *testing.T) {
	for _, size := range []int64{0, 1, 1 << 20, 5<<19 + 3} {
		t.Run(fmtSize(size), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			if out, err := exec.Command("bash", "-c", writeScript(dir, size)).CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var total int64
			for _, e := range ents {
				fi, err := e.Info()
				if err != nil {
					t.Fatal(err)
				}
				if fi.Size() > 1<<20 {
					t.Errorf("%s holds %d bytes, more than 1 MiB", e.Name(), fi.Size())
				}
				total += fi.Size()
			}
			if total != size {
				t.Errorf("wrote %d bytes, want %d", total, size)
			}
		})
	}
}

// TestForkRows: the fork table groups a phase and param's samples per
// method, takes p50 and p90 by nearest rank, and the ratio of each
// method's p50 to podman's in the same group only.
func TestForkRows(t *testing.T) {
	var samples []Sample
	add := func(m, phase, param string, vals ...float64) {
		for i, v := range vals {
			samples = append(samples, Sample{Key: Key{Measure: MeasureFork, Workload: WorkloadBare, Method: m, Phase: phase, Param: param}, Round: i, Value: v, Unit: UnitSeconds})
		}
	}
	ten := []float64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}
	add(MethodPodman, PhaseSnapshot, "written=8MiB", 20, 20, 20)
	add(MethodMSB, PhaseSnapshot, "written=8MiB", ten...)
	add(MethodMSB, PhaseRollback, "written=8MiB", 2, 4)
	samples = append(samples, Sample{Key: Key{Measure: MeasureReady, Method: MethodMSB, Phase: PhaseSnapshot, Param: "written=8MiB"}, Value: 99})

	got := forkRows(samples)
	want := []forkRow{
		{phase: PhaseSnapshot, param: "written=8MiB", method: MethodMSB, unit: UnitSeconds, n: 10, p50: 5, p90: 9, vsPodman: 0.25},
		{phase: PhaseSnapshot, param: "written=8MiB", method: MethodPodman, unit: UnitSeconds, n: 3, p50: 20, p90: 20},
		{phase: PhaseRollback, param: "written=8MiB", method: MethodMSB, unit: UnitSeconds, n: 2, p50: 2, p90: 4},
	}
	if !slices.Equal(got, want) {
		t.Errorf("rows\n%+v\nwant\n%+v", got, want)
	}
	tables := forkTables(samples)
	if len(tables) != 1 || len(tables[0].rows) != 3 || tables[0].rows[0][6] != "25.0%" || tables[0].rows[2][6] != "-" {
		t.Errorf("table %+v", tables)
	}
}

// TestFork runs the fork comparison for real at a tiny size, with spares
// (the notes count their hits), podman
// asked for but not on PATH: its absence is said and only its side is
// left out; every phase of msb's has its samples, the children carry the
// parent's cwd and variable (a trial fails otherwise), an idle child holds
// no bytes of its own, and nothing is left behind: no sandbox state, no
// snapshot and no snapshot's layer in the cache.
func TestFork(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real sandboxes")
	}
	work := t.TempDir()
	t.Setenv("PATH", t.TempDir()) // no podman; msb's side runs no host program
	cfg := engine.Config{StateDir: privtest.StateDir(t)}
	o := ForkOptions{Work: work, Sizes: []int64{0, 1<<20 + 7}, Rounds: 2, Warmup: 1, LargeRounds: 1, Children: 3, ForkBytes: 1 << 20, Idle: time.Millisecond, Podman: true, Spares: 4, ReadySpares: true,
		Progress: func(l string) { t.Log(time.Now().Format("15:04:05.0"), l) }}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Fork(ctx, cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failures) > 0 {
		t.Fatalf("failures:\n%s", strings.Join(rep.Failures, "\n"))
	}
	if !slices.ContainsFunc(rep.Notes, func(s string) bool {
		return strings.HasPrefix(s, "fork: 4 spares (--spares; each fork waited, untimed, up to 5s for its spares (--ready-spares): ") &&
			strings.Contains(s, " did not get them all): children taken from spares ")
	}) {
		t.Errorf("the notes do not count the spares' hits and the forks that waited in vain: %q", rep.Notes)
	}
	if !slices.ContainsFunc(rep.Skipped, func(s string) bool { return strings.HasPrefix(s, "podman: skipped: podman is not installed") }) {
		t.Errorf("podman's absence is not reported: skipped %v", rep.Skipped)
	}
	count := map[Key]int{}
	for _, s := range rep.Samples {
		count[s.Key]++
		if s.Value < 0 || (s.Value == 0) != (s.Phase == PhaseForkDisk) {
			t.Errorf("sample %+v: only an idle child's disk may be (and is) 0", s)
		}
	}
	key := func(phase, param string) Key {
		return Key{Measure: MeasureFork, Workload: WorkloadBare, Method: MethodMSB, Phase: phase, Param: param}
	}
	for _, size := range o.Sizes {
		wantSamples(t, count, key(PhaseSnapshot, "written="+fmtSize(size)), o.Rounds)
	}
	// The parents wrote ForkBytes before each fork.
	wantSamples(t, count, key(PhaseFork, "children=1,written=1MiB"), o.Rounds)
	wantSamples(t, count, key(PhaseForkAll, "children=1,written=1MiB"), 0)
	wantSamples(t, count, key(PhaseFork, "children=3,written=1MiB"), 3)
	wantSamples(t, count, key(PhaseForkAll, "children=3,written=1MiB"), 1)
	wantSamples(t, count, key(PhaseForkPSS, "children=3,written=1MiB"), 3)
	wantSamples(t, count, key(PhaseForkDisk, "children=3,written=1MiB"), 3)
	wantSamples(t, count, key(PhaseRollback, "written=8MiB"), o.Rounds)
	if len(count) != 8 {
		t.Errorf("%d keys, want 8: %v", len(count), count)
	}

	var txt strings.Builder
	if err := rep.WriteText(&txt); err != nil || !strings.Contains(txt.String(), "Fork, snapshot and rollback") {
		t.Errorf("the summary has no fork table (%v):\n%s", err, txt.String())
	}

	cfg.Cache = engine.CacheConfig{Dir: filepath.Join(work, "fork", "cache")}
	e, err := engine.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if snaps, err := e.Snapshots(); err != nil || len(snaps) > 0 {
		t.Errorf("snapshots left behind: %v %v", snaps, err)
	}
	if r, err := e.Cache().GC(ctx); err != nil || r.FreedBytes > 0 || len(r.Layers) > 0 {
		t.Errorf("the snapshots' layers were left for a later gc: %+v %v", r, err)
	}
	if sbs := e.Sandboxes(nil); len(sbs) > 0 {
		t.Errorf("sandboxes left: %v", sbs)
	}
}
