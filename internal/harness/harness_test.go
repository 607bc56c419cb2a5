package harness

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/minisandbox/msb/internal/api"
)

func files(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// TestFilesPerOutcome: the harness's files for each outcome, and a stale
// report.json gone when an instance is evaluated again with another outcome.
func TestFilesPerOutcome(t *testing.T) {
	d := New(t.TempDir())
	ctx := context.Background()
	full := api.EvalArtifacts{Ran: true, PatchWritten: true, ScriptWritten: true, TestsRan: true, Patch: "p", EvalScript: "s", TestOutput: "o", RunLog: "l"}
	for _, tc := range []struct {
		outcome api.Outcome
		art     api.EvalArtifacts
		want    []string
	}{
		{api.OutcomeResolved, full, []string{EvalScriptFile, PatchFile, ReportFile, ResultFile, RunLogFile, TestOutputFile}},
		{api.OutcomeUnresolved, full, []string{EvalScriptFile, PatchFile, ReportFile, ResultFile, RunLogFile, TestOutputFile}},
		{api.OutcomeTestTimeout, full, []string{EvalScriptFile, PatchFile, ResultFile, RunLogFile, TestOutputFile}},
		{api.OutcomePatchApplyFailed, api.EvalArtifacts{Ran: true, PatchWritten: true, RunLog: "l"}, []string{PatchFile, ResultFile, RunLogFile}},
		{api.OutcomeEnvBuildFailed, api.EvalArtifacts{Ran: true, RunLog: "l"}, []string{ResultFile, RunLogFile}},
		{api.OutcomeEmptyPatch, api.EvalArtifacts{}, nil},
	} {
		res := api.EvalResult{InstanceID: "a__b-1", Model: "org/model", Outcome: tc.outcome}
		if err := d.Put(ctx, "run", res, tc.art); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(d.Root(), "run", "org__model", "a__b-1")
		if got := files(t, dir); !equal(got, tc.want) {
			t.Errorf("%s: files %v, want %v", tc.outcome, got, tc.want)
		}
		back, ok, err := d.Lookup(ctx, "run", "org/model", "a__b-1")
		if err != nil || ok != (tc.outcome != api.OutcomeEmptyPatch) || ok && back.Outcome != tc.outcome {
			t.Errorf("%s: lookup %v %v %+v", tc.outcome, ok, err, back)
		}
	}
	// Nothing but the instance directory is left (no temp dirs).
	if got := files(t, filepath.Join(d.Root(), "run", "org__model")); len(got) != 0 {
		t.Errorf("left in the model dir: %v", got)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestNamesStayInTheRoot: ids, models and run ids that would leave the
// directory are refused, and nothing is written.
func TestNamesStayInTheRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "out")
	d := New(root)
	ctx := context.Background()
	art := api.EvalArtifacts{Ran: true, RunLog: "x"}
	for _, tc := range []struct{ run, model, id string }{
		{"..", "m", "i"}, {".", "m", "i"}, {"a/b", "m", "i"}, {"r", "..", "i"}, {"r", "m", "../../../x"},
		{"r", "m", ".."}, {"r", "m", "a\x00b"}, {"", "m", "i"}, {"r", "m", "a\\b"},
	} {
		err := d.Put(ctx, tc.run, api.EvalResult{InstanceID: tc.id, Model: tc.model, Outcome: api.OutcomeResolved}, art)
		if !errors.Is(err, api.ErrBadName) {
			t.Errorf("put %q %q %q: %v", tc.run, tc.model, tc.id, err)
		}
		if tc.run == "r" && tc.model == "m" {
			continue // only the instance id is bad
		}
		if err := d.Summary(ctx, api.RunSummary{RunID: tc.run, Model: tc.model}); !errors.Is(err, api.ErrBadName) {
			t.Errorf("summary %q %q: %v", tc.run, tc.model, err)
		}
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("something was written: %v", err)
	}
	// A model name's "/" is the harness's "__".
	if p, err := d.SummaryPath("r", "org/model"); err != nil || filepath.Base(p) != "org__model.r.json" {
		t.Errorf("summary path %s %v", p, err)
	}
}

func TestWriteValidation(t *testing.T) {
	d := New(t.TempDir())
	valid, invalid, err := d.WriteValidation(api.ValidationReport{RunID: "v"})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{valid: "[]", invalid: "{}"} {
		b, err := os.ReadFile(p)
		if err != nil || string(b) != want {
			t.Errorf("%s: %q %v, want %s", p, b, err, want)
		}
	}
	var back []string
	valid, _, _ = d.WriteValidation(api.ValidationReport{RunID: "v", Valid: []string{"a"}, Invalid: map[string]string{"b": "why"}})
	b, _ := os.ReadFile(valid)
	if json.Unmarshal(b, &back) != nil || len(back) != 1 {
		t.Errorf("valid.json %s", b)
	}
}

// TestSummaryWritersAtOnce: evaluations of the same run id that write the
// same summary at once each succeed, through temporary files of their own,
// and leave only the summary.
func TestSummaryWritersAtOnce(t *testing.T) {
	d := New(t.TempDir())
	errs := make(chan error, 8*40)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 40 {
				errs <- d.Summary(context.Background(), api.RunSummary{RunID: "r", Model: "m", TotalInstances: w})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := files(t, filepath.Join(d.Root(), "r")); len(got) != 1 || got[0] != "m.r.json" {
		t.Fatalf("run dir holds %v, want only m.r.json", got)
	}
}

// TestLockRun: an instance of a run held by one writer is refused to
// another, naming the run id and instance, until released; other
// instances of the same run (msb.ray's one-instance jobs) go on.
func TestLockRun(t *testing.T) {
	root := t.TempDir()
	unlock, err := New(root).LockRun("r", []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(root).LockRun("r", []string{"c", "b"}); !errors.Is(err, ErrRunBusy) || !strings.Contains(err.Error(), `"r"`) || !strings.Contains(err.Error(), "instance b") {
		t.Fatalf("second LockRun of a held instance: %v", err)
	}
	other, err := New(root).LockRun("r", []string{"c"})
	if err != nil {
		t.Fatalf("another instance (c was released by the refused LockRun): %v", err)
	}
	other()
	unlock()
	again, err := New(root).LockRun("r", []string{"a", "b", "c"})
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	again()
}
