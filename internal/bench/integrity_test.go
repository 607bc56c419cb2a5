package bench

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/spec"
)

// TestIntegritySummary: the integrity table takes each mode's p50 and p90
// by nearest rank, without reordering the report's samples, and compares
// each canary mode's p50 with off's (wall and CPU ratio, difference, per
// row) only when both have samples; the text says whether the 5% goal is
// met.
func TestIntegritySummary(t *testing.T) {
	ms := func(x int) time.Duration { return time.Duration(x) * time.Millisecond }
	var samples []IntegritySample
	add := func(mode, row string, cpu int, walls ...int) {
		for i, w := range walls {
			samples = append(samples, IntegritySample{Instance: row, Mode: mode, Round: i, Wall: ms(w), Script: ms(w / 2), CPU: ms(cpu)})
		}
	}
	add(IntegrityOff, "a", 80, 100, 91, 99, 92, 98)
	add(IntegrityOff, "b", 80, 93, 97, 94, 96, 95)
	add("separate", "a", 160, 120, 104, 110)
	add("separate", "b", 0, 101, 150)
	rep := IntegrityReport{Rounds: 5, Instances: 2, LoadBefore: "1.00 2.00 3.00", LoadAfter: "4.00 5.00 6.00",
		Modes: []string{IntegrityOff, "separate", "inline"}, Samples: samples}
	kept := slices.Clone(samples)

	got := rep.Summary().Lines
	if len(got) != 3 {
		t.Fatalf("lines %+v", got)
	}
	off, sep, inline := got[0], got[1], got[2]
	if off.N != 10 || off.WallP50 != ms(95) || off.WallP90 != ms(99) || off.CPUP50 != ms(80) || off.Ratio != 0 {
		t.Errorf("off: %+v", off)
	}
	wantRows := map[string]float64{"a": 110.0 / 98, "b": 101.0 / 95}
	if sep.N != 5 || sep.WallP50 != ms(110) || sep.WallP90 != ms(150) || sep.Ratio != 110.0/95 || sep.Diff != ms(15) ||
		sep.CPUP50 != ms(160) || sep.CPURatio != 2 || !maps.Equal(sep.PerRow, wantRows) {
		t.Errorf("separate: %+v", sep)
	}
	if inline.N != 0 || inline.Ratio != 0 {
		t.Errorf("inline without samples: %+v", inline)
	}
	if !slices.Equal(rep.Samples, kept) {
		t.Errorf("the report's samples were reordered: %v", rep.Samples)
	}

	txt := textOf(rep)
	for _, w := range []string{"load average before 1.00 2.00 3.00, after 4.00 5.00 6.00", "1.158", "0.015s", "2.00", "a 1.12, b 1.06",
		"canary separate adds +15.8%", "goal <= 5%: not met"} {
		if !strings.Contains(txt, w) {
			t.Errorf("the text lacks %q:\n%s", w, txt)
		}
	}

	rep.Samples = append(slices.Clone(kept[:10]), IntegritySample{Instance: "a", Mode: "inline", Wall: ms(99)})
	if l := rep.Summary().Lines[2]; l.Ratio != 99.0/95 || l.CPURatio != 0 || !strings.Contains(textOf(rep), "goal <= 5%: met") {
		t.Errorf("inline %+v, text:\n%s", l, textOf(rep))
	}
}

func textOf(r IntegrityReport) string {
	var b strings.Builder
	r.WriteText(&b)
	return b.String()
}

// TestIntegrity runs the integrity comparison for real on one demo
// instance, one round: both modes grade the gold patch resolved (the
// integrity stage finding it ok), each gives one sample of the whole
// evaluation and of its script, and no sandbox is left behind (TestMain).
func TestIntegrity(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real sandboxes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := engine.Config{StateDir: privtest.StateDir(t)}
	rep := Integrity(ctx, cfg, IntegrityOptions{Rounds: 1, Instances: 1, Dir: t.TempDir(), CPUTime: true})
	if rep.Failed != "" {
		t.Fatal(rep.Failed)
	}
	if rep.Instances != 1 || rep.LoadBefore == "?" {
		t.Errorf("instances %d, load %q", rep.Instances, rep.LoadBefore)
	}
	checkSamples(t, rep, true)
}

// TestIntegrityDataset runs the comparison on a dataset's rows instead of
// the embedded demo: the demo's rows written as a dataset file, the
// engine's cache and overrides the caller's, one row named by id.
func TestIntegrityDataset(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real sandboxes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	gen, err := demo.Generate(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	ov, err := spec.ParseOverrides([]byte(demo.SpecYAML(gen.PyVersion)))
	if err != nil {
		t.Fatal(err)
	}
	id := gen.Instances[1].InstanceID
	cfg := engine.Config{StateDir: privtest.StateDir(t), Overrides: ov, Cache: engine.CacheConfig{Dir: filepath.Join(dir, "cache")}}
	rep := Integrity(ctx, cfg, IntegrityOptions{Rounds: 1, Dataset: gen.DatasetPath, IDs: []string{id}})
	if rep.Failed != "" {
		t.Fatal(rep.Failed)
	}
	if rep.Instances != 1 || rep.Source != gen.DatasetPath {
		t.Errorf("instances %d, source %q", rep.Instances, rep.Source)
	}
	checkSamples(t, rep, false)
	if !strings.Contains(textOf(rep), "1 instances ("+gen.DatasetPath+")") {
		t.Errorf("the text does not name the dataset:\n%s", textOf(rep))
	}
}

// checkSamples: a one-round report of one instance has a sample of each
// mode, whose eval script took part of its wall time, the separate and
// forked canaries' sandboxes ran, and, as root (where the sandboxes have cgroups)
// with cpuTime (IntegrityOptions.CPUTime), the CPU time is known.
func checkSamples(t *testing.T, rep IntegrityReport, cpuTime bool) {
	t.Helper()
	if len(rep.Samples) != len(integrityModes) {
		t.Fatalf("samples %+v, want one per mode", rep.Samples)
	}
	for _, x := range rep.Samples {
		if x.Script <= 0 || x.Script > x.Wall || (x.Mode == string(api.CanarySeparate) || x.Mode == string(api.CanaryForked)) != (x.Canary > 0) || (os.Geteuid() == 0 && x.CPU <= 0 && cpuTime) {
			t.Errorf("%+v", x)
		}
	}
}
