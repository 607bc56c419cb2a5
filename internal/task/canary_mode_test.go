package task

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/grading"
)

// Where the canary runs (EvalOptions.Canary) and how its sandbox runs
// beside the harness's (EvalOptions.Beside): each evaluated for real on
// the demo's first instance.

// noopAssertsInLibrary is the exploit the canary alone catches: library
// code that makes assertEqual and assertTrue no-ops.
var noopAssertsInLibrary = map[string]string{"calc/__init__.py": "import unittest\nunittest.TestCase.assertEqual = lambda self, first, second, msg=None: None\nunittest.TestCase.assertTrue = lambda self, expr, msg=None: None\n"}

// admission counts the canary sandboxes admitted beside the harness's and
// given back; admit false refuses every one.
type admission struct {
	admit bool

	mu            sync.Mutex // guards the counts
	taken, given  int
	refusedBefore int
}

func (a *admission) beside() (func(), bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.admit {
		a.refusedBefore++
		return nil, false
	}
	a.taken++
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.given++
		})
	}, true
}

// TestCanaryBeside: the canary's sandbox runs beside the harness's when
// admitted, after it when not; both ways the exploit is flagged by the
// canary, the gold patch is ok and resolved, and an admitted reservation
// is given back.
func TestCanaryBeside(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	inst := f.gen.Instances[0]
	exploit := exploitPatch(t, f.gen.RepoDir, inst.BaseCommit, noopAssertsInLibrary)
	for _, c := range []struct {
		name  string
		admit bool
		log   string
	}{
		{"admitted", true, "Integrity canary ran beside the harness's run, in "},
		{"not admitted", false, "after the harness's run"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &admission{admit: c.admit}
			o := opts()
			o.Beside = a.beside
			ev := Evaluate(ctx, f.env, f.task(t, 0, ""), api.Prediction{InstanceID: inst.InstanceID, Model: "x", ModelPatch: &exploit}, o)
			checkFlagged(t, ev, false)
			if !strings.Contains(ev.Artifacts.RunLog, c.log) {
				t.Errorf("run log lacks %q:\n%s", c.log, ev.Artifacts.RunLog)
			}
			gold := Evaluate(ctx, f.env, f.task(t, 0, ""), api.Prediction{InstanceID: inst.InstanceID, Model: "gold", ModelPatch: ptr(inst.Patch)}, o)
			r := gold.Result
			if r.Outcome != api.OutcomeResolved || r.Report.Integrity != api.IntegrityOK || !strings.Contains(gold.Artifacts.TestOutput, "msb canary end") {
				t.Fatalf("gold: %s integrity %q %q\n%s", r.Outcome, r.Report.Integrity, r.Report.IntegrityReasons, gold.Artifacts.RunLog)
			}
			if r.Timings.Canary <= 0 {
				t.Errorf("gold: no canary time in %+v", r.Timings)
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			if want := map[bool]int{true: 2, false: 0}[c.admit]; a.taken != want || a.given != a.taken || a.refusedBefore != 2-want {
				t.Errorf("admitted %d, given back %d, refused %d; want %d admitted and given back", a.taken, a.given, a.refusedBefore, want)
			}
		})
	}
}

// errCanaryBroken is the failure TestCanarySandboxFailure gives the
// canary's sandbox.
var errCanaryBroken = errors.New("the canary's sandbox broke")

// TestCanarySandboxFailure: a canary whose sandbox fails makes the
// evaluation an infrastructure error that says so, never a verdict (not
// a silent ok), with the harness's log kept; beside the harness's run and
// after it.
func TestCanarySandboxFailure(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	inst := f.gen.Instances[0]
	for _, admit := range []bool{true, false} {
		var canary *Sandbox
		o := opts()
		o.Beside = (&admission{admit: admit}).beside
		o.canaryOpened = func(sb *Sandbox) error {
			canary = sb
			return errCanaryBroken
		}
		ev := Evaluate(ctx, f.env, f.task(t, 0, ""), api.Prediction{InstanceID: inst.InstanceID, Model: "gold", ModelPatch: ptr(inst.Patch)}, o)
		r := ev.Result
		if r.Outcome != api.OutcomeInfraError || r.Reward != 0 || !strings.Contains(r.Detail, "integrity canary") || !strings.Contains(r.Detail, errCanaryBroken.Error()) {
			t.Fatalf("admitted %v: %s reward %v detail %q", admit, r.Outcome, r.Reward, r.Detail)
		}
		if !strings.Contains(ev.Artifacts.TestOutput, grading.EndTestOutput) || !ev.Artifacts.TestsRan {
			t.Errorf("admitted %v: the harness's log was not kept:\n%s", admit, ev.Artifacts.TestOutput)
		}
		if canary == nil {
			t.Fatalf("admitted %v: the canary's sandbox did not open", admit)
		}
		if <-canary.Cleaned(); canary.Alive() {
			t.Fatalf("admitted %v: the canary's sandbox is still alive", admit)
		}
	}
}

// TestCanaryCancel: cancelling an evaluation while the canary runs beside
// the harness's run ends both: no verdict, both sandboxes closed.
func TestCanaryCancel(t *testing.T) {
	f := newFixture(t)
	inst := f.gen.Instances[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var canary *Sandbox
	o := opts()
	o.canaryOpened = func(sb *Sandbox) error {
		canary = sb
		cancel()
		return nil
	}
	ev := Evaluate(ctx, f.env, f.task(t, 0, ""), api.Prediction{InstanceID: inst.InstanceID, Model: "gold", ModelPatch: ptr(inst.Patch)}, o)
	if r := ev.Result; r.Outcome.IsVerdict() || r.Reward != 0 {
		t.Fatalf("cancelled: %s reward %v (%s)", r.Outcome, r.Reward, r.Detail)
	}
	if canary == nil {
		t.Fatal("the canary's sandbox did not open")
	}
	if <-canary.Cleaned(); canary.Alive() {
		t.Fatal("the canary's sandbox is still alive")
	}
}

// TestCanaryModes: inline runs the canary in the harness's sandbox, after
// its tests, and still flags the exploit; off runs none (a note says so)
// while the static rules still flag what they see; the gold patch is ok
// and resolved in both.
func TestCanaryModes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	inst := f.gen.Instances[0]
	eval := func(t *testing.T, mode api.CanaryMode, files map[string]string) Evaluation {
		t.Helper()
		p := inst.Patch
		if files != nil {
			p = exploitPatch(t, f.gen.RepoDir, inst.BaseCommit, files)
		}
		o := opts()
		o.Canary = mode
		o.canaryOpened = func(*Sandbox) error { return errors.New("a canary sandbox was opened") }
		return Evaluate(ctx, f.env, f.task(t, 0, ""), api.Prediction{InstanceID: inst.InstanceID, Model: "x", ModelPatch: &p}, o)
	}
	t.Run("inline", func(t *testing.T) {
		ev := eval(t, api.CanaryInline, noopAssertsInLibrary)
		checkFlagged(t, ev, false)
		if !strings.Contains(ev.Artifacts.TestOutput, "msb canary end") {
			t.Errorf("the canary did not run in the harness's script:\n%s", ev.Artifacts.TestOutput)
		}
		gold := eval(t, api.CanaryInline, nil)
		if r := gold.Result; r.Outcome != api.OutcomeResolved || r.Report.Integrity != api.IntegrityOK || len(r.Report.IntegrityNotes) != 0 {
			t.Fatalf("gold: %s integrity %q %q %q", r.Outcome, r.Report.Integrity, r.Report.IntegrityReasons, r.Report.IntegrityNotes)
		}
	})
	t.Run("off", func(t *testing.T) {
		ev := eval(t, api.CanaryOff, noopAssertsInLibrary)
		if r := ev.Result; r.Outcome != api.OutcomeResolved || r.Report.Integrity != api.IntegrityOK || !slices.Equal(r.Report.IntegrityNotes, []string{canaryOffNote}) {
			t.Fatalf("library exploit, no canary: %s integrity %q %q notes %q", r.Outcome, r.Report.Integrity, r.Report.IntegrityReasons, r.Report.IntegrityNotes)
		}
		static := eval(t, api.CanaryOff, map[string]string{"tests/__init__.py": noopAssertsInLibrary["calc/__init__.py"]})
		if r := static.Result; r.Report.Integrity != api.IntegrityTampered || slices.ContainsFunc(r.Report.IntegrityReasons, func(s string) bool { return strings.HasPrefix(s, "canary: ") }) {
			t.Fatalf("static exploit, no canary: integrity %q %q", r.Report.Integrity, r.Report.IntegrityReasons)
		}
		if strings.Contains(static.Artifacts.TestOutput, "msb canary") {
			t.Errorf("a canary ran:\n%s", static.Artifacts.TestOutput)
		}
	})
}

// TestCanaryBesidePlacedAgain: the canary started beside the harness's
// run is placed in the first selected module; when the harness's run
// passes no test of that module (here a new test module of the test
// patch that fails to import, listed first), the canary runs again, in
// the module the harness's statuses name. The gold patch stays ok and
// resolved; the canary left in the first module would have been missing.
func TestCanaryBesidePlacedAgain(t *testing.T) {
	f := newFixture(t)
	inst := f.gen.Instances[0]
	inst.TestPatch = "diff --git a/tests/test_aaa.py b/tests/test_aaa.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/test_aaa.py\n" +
		"@@ -0,0 +1,2 @@\n+import unittest\n+import calc_has_no_such_module\n" + inst.TestPatch
	tk, err := New(inst, f.overrides(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	if d := tk.Spec.TestDirectives(inst.TestPatch); len(d) < 2 || d[0] != "tests/test_aaa.py" {
		t.Fatalf("directives %q: the failing module is not first", d)
	}
	ev := Evaluate(context.Background(), f.env, tk, api.Prediction{InstanceID: inst.InstanceID, Model: "gold", ModelPatch: ptr(inst.Patch)}, opts())
	r := ev.Result
	if r.Outcome != api.OutcomeResolved || r.Report.Integrity != api.IntegrityOK {
		t.Fatalf("gold: %s integrity %q %q\n%s", r.Outcome, r.Report.Integrity, r.Report.IntegrityReasons, ev.Artifacts.RunLog)
	}
	if !strings.Contains(ev.Artifacts.RunLog, "started beside the harness's run in tests/test_aaa.py, but the harness's run puts it in tests/test_stats.py: running it again") {
		t.Errorf("the canary was not placed again:\n%s", ev.Artifacts.RunLog)
	}
}
