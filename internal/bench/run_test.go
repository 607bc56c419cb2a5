package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRunSmall runs every measure for real, at a tiny size, on the bare
// and synthetic workloads against the paper's mechanism (podman is not
// part of the test suite's machine), and checks that every comparison
// produced its samples, interleaved, and left nothing behind.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real sandboxes and builds two venvs")
	}
	rt := testRuntime(t)
	work := t.TempDir()
	o := Options{Work: work, Workloads: []string{WorkloadBare, WorkloadSynthetic}, Rounds: 2, Warmup: 1, Cold: true,
		Instances: 2, DiskNs: []int{1, 2}, Workers: []int{1, 2}, Duration: 400 * time.Millisecond, ThroughputRounds: 2,
		RoundTrips: 20, Density: 3, PrepInstances: 2, Files: 30, FileSize: 256}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := Run(ctx, rt, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failures) > 0 {
		t.Fatalf("failures:\n%s", strings.Join(rep.Failures, "\n"))
	}
	if !slices.ContainsFunc(rep.Skipped, func(s string) bool { return strings.HasPrefix(s, "podman:") }) {
		t.Errorf("podman's absence is not reported: skipped %v", rep.Skipped)
	}
	count := map[Key]int{}
	slots := map[Key]map[int]bool{}
	for _, s := range rep.Samples {
		if s.Value <= 0 && s.Measure != MeasurePSS {
			t.Errorf("sample %+v is not positive", s)
		}
		count[s.Key]++
		if slots[s.Key] == nil {
			slots[s.Key] = map[int]bool{}
		}
		slots[s.Key][s.Slot] = true
	}
	want := func(k Key, n int) {
		t.Helper()
		if count[k] != n {
			t.Errorf("%+v: %d samples, want %d", k, count[k], n)
		}
	}
	for _, w := range []string{WorkloadBare, WorkloadSynthetic} {
		for _, m := range []string{MethodMSB, MethodPaper} {
			for _, c := range []string{Warm, Cold} {
				for _, ph := range []string{"create", "answer", "ready", "close", "cycle"} {
					want(Key{MeasureReady, w, m, ph, c, ""}, o.Rounds)
				}
				tasks := 0 // the bare workload has no real task
				if w == WorkloadSynthetic {
					tasks = o.Rounds
				}
				want(Key{MeasureReady, w, m, "task", c, ""}, tasks)
			}
			// two rounds of two methods: each ran first once and second once
			if s := slots[Key{MeasureReady, w, m, "ready", Warm, ""}]; !s[0] || !s[1] {
				t.Errorf("%s %s ran in slots %v, want 0 and 1", w, m, s)
			}
			for _, wk := range []string{"workers=1", "workers=2"} {
				want(Key{MeasureThroughput, w, m, "cycle", Warm, wk}, o.ThroughputRounds)
			}
		}
	}
	for _, m := range []string{MethodRaw, MethodMSBHost, MethodMSB, MethodPaper} {
		want(Key{MeasureRoundTrip, WorkloadBare, m, PhaseSession, Warm, ""}, o.RoundTrips)
	}
	for _, m := range []string{MethodRaw, MethodMSB} {
		want(Key{MeasureRoundTrip, WorkloadBare, m, PhaseExec, Warm, ""}, o.RoundTrips)
	}
	for _, m := range []string{MethodMSB, MethodPaper} {
		want(Key{MeasurePSS, WorkloadBare, m, PhasePSS, "", "n=3"}, 3)
		want(Key{MeasurePSS, WorkloadBare, m, PhaseTop, "", "n=3"}, 3)
		for _, n := range []string{"n=1", "n=2"} {
			want(Key{MeasureDisk, WorkloadSynthetic, m, PhaseTotal, "", n}, 1)
			want(Key{MeasureDisk, WorkloadSynthetic, m, PhaseTasks, "", n}, 1)
		}
		want(Key{MeasurePrep, WorkloadSynthetic, m, PhaseEnv, "", ""}, 1)
		want(Key{MeasurePrep, WorkloadSynthetic, m, PhaseInstance, "", ""}, 1)
	}
	want(Key{MeasureDisk, WorkloadSynthetic, MethodMSB, PhaseMirror, "", "n=2"}, 1)
	want(Key{MeasureDisk, WorkloadSynthetic, MethodPaper, PhaseTarballs, "", "n=2"}, 1)

	out := filepath.Join(t.TempDir(), "out")
	files, err := rep.Write(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"samples.csv", "summary.csv", "summary.txt", "summary.md", "report.json", "ready-synthetic-warm.png", "disk-synthetic.png"} {
		if !slices.Contains(files, filepath.Join(out, f)) {
			t.Errorf("%s not written (wrote %v)", f, files)
		}
	}
	f, err := os.Open(filepath.Join(out, "samples.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	back, err := ReadCSV(f)
	if err != nil || len(back) != len(rep.Samples) {
		t.Fatalf("samples.csv holds %d samples (%v), the report %d", len(back), err, len(rep.Samples))
	}

	// nothing left: no task dirs of the paper, no sandbox state
	if left, _ := os.ReadDir(filepath.Join(work, "tasks")); len(left) > 0 {
		t.Errorf("task dirs left behind: %v", left)
	}
	if left, _ := os.ReadDir(filepath.Join(work, "prep")); len(left) > 0 {
		t.Errorf("preparation dirs left behind: %v", left)
	}
	states, _ := os.ReadDir(rt.StateDir())
	for _, s := range states {
		if s.Name() != ".empty" {
			t.Errorf("sandbox state left behind: %s", s.Name())
		}
	}
}
