package bench

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/spec"
)

// TestIntegritySummary: the integrity table takes each mode's p50 and p90
// by nearest rank, without reordering the report's samples, and compares
// on's p50 with off's (ratio and difference) only when both modes have
// samples; the text says whether the 5% goal is met.
func TestIntegritySummary(t *testing.T) {
	s := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	off := s(100, 91, 99, 92, 98, 93, 97, 94, 96, 95)
	rep := IntegrityReport{Rounds: 5, Instances: 2, LoadBefore: "1.00 2.00 3.00", LoadAfter: "4.00 5.00 6.00",
		Times:       map[string][]time.Duration{IntegrityOff: off, IntegrityOn: s(120, 104, 110, 101, 150)},
		ScriptTimes: map[string][]time.Duration{IntegrityOff: s(50, 40)}}
	kept := slices.Clone(off)

	got := rep.Summary()
	want := IntegritySummary{
		Eval: IntegrityLine{OffN: 10, OnN: 5, OffP50: 95 * time.Millisecond, OffP90: 99 * time.Millisecond,
			OnP50: 110 * time.Millisecond, OnP90: 150 * time.Millisecond, Ratio: 110.0 / 95, Diff: 15 * time.Millisecond},
		Script: IntegrityLine{OffN: 2, OffP50: 40 * time.Millisecond, OffP90: 50 * time.Millisecond},
	}
	if got != want {
		t.Errorf("summary\n%+v\nwant\n%+v", got, want)
	}
	if !slices.Equal(rep.Times[IntegrityOff], kept) {
		t.Errorf("the report's samples were reordered: %v", rep.Times[IntegrityOff])
	}

	var txt strings.Builder
	rep.WriteText(&txt)
	for _, w := range []string{"load average before 1.00 2.00 3.00, after 4.00 5.00 6.00", "1.158", "0.015s", "+15.8%", "goal <= 5%: not met"} {
		if !strings.Contains(txt.String(), w) {
			t.Errorf("the text lacks %q:\n%s", w, txt.String())
		}
	}

	rep.Times[IntegrityOn] = s(99, 98, 100)
	if l := rep.Summary().Eval; l.Ratio != 99.0/95 || !strings.Contains(textOf(rep), "goal <= 5%: met") {
		t.Errorf("ratio %v, text:\n%s", l.Ratio, textOf(rep))
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
	rep := Integrity(ctx, cfg, IntegrityOptions{Rounds: 1, Instances: 1, Dir: t.TempDir()})
	if rep.Failed != "" {
		t.Fatal(rep.Failed)
	}
	if rep.Instances != 1 || rep.LoadBefore == "?" {
		t.Errorf("instances %d, load %q", rep.Instances, rep.LoadBefore)
	}
	for _, m := range integrityModes {
		if len(rep.Times[m]) != 1 || len(rep.ScriptTimes[m]) != 1 || rep.ScriptTimes[m][0] <= 0 || rep.ScriptTimes[m][0] > rep.Times[m][0] {
			t.Errorf("%s: times %v, script times %v", m, rep.Times[m], rep.ScriptTimes[m])
		}
	}
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
	for _, m := range integrityModes {
		if len(rep.Times[m]) != 1 || rep.ScriptTimes[m][0] <= 0 {
			t.Errorf("%s: times %v, script times %v", m, rep.Times[m], rep.ScriptTimes[m])
		}
	}
	if !strings.Contains(textOf(rep), "1 instances ("+gen.DatasetPath+")") {
		t.Errorf("the text does not name the dataset:\n%s", textOf(rep))
	}
}
