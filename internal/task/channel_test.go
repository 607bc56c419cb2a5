package task

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/grading"
)

// nodeID is the pytest id of a demo test named as the unittest parser
// names it, "tests.test_calc.TestCalc.test_x": "tests/test_calc.py::TestCalc::test_x".
func nodeID(t *testing.T, id string) string {
	t.Helper()
	parts := strings.Split(id, ".")
	if len(parts) < 3 {
		t.Fatalf("unexpected unittest id %q", id)
	}
	n := len(parts)
	return strings.Join(parts[:n-2], "/") + ".py::" + parts[n-2] + "::" + parts[n-1]
}

// fakePassedAtExit is library code that, in a run of the instance's test
// file (and not in the canary's, which selects another file), prints a
// pytest PASSED line for every id when the process exits, and exits 0.
func fakePassedAtExit(testFile string, ids []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "import atexit, os, sys\n\n\ndef _msb_fake():\n")
	for _, id := range ids {
		fmt.Fprintf(&b, "    sys.stdout.write(%q)\n", "PASSED "+id+"\n")
	}
	b.WriteString("    sys.stdout.flush()\n    os._exit(0)\n\n\n")
	fmt.Fprintf(&b, "if any(%q in a for a in sys.argv):\n    atexit.register(_msb_fake)\n", testFile)
	return b.String()
}

// TestChannelFlagsFakePassed: under pytest, a patch whose library code
// prints fake PASSED lines for the instance's tests at exit (status 0),
// only in the instance's run, resolves by the log alone; pytest's own
// report, read from the structured channel, says the tests failed, so it
// is flagged tampered with reward 0 (the canary, run with the instance's
// command line, flags it too). The gold
// patch resolves and stays ok, and the log between the markers is the
// harness's (nothing of the channel in it).
func TestChannelFlagsFakePassed(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	env := pytestEnv(t, f)
	inst := f.gen.Instances[0]
	var ids []string
	for _, l := range []*[]string{&inst.FailToPass, &inst.PassToPass} {
		*l = slices.Clone(*l)
		for i, id := range *l {
			(*l)[i] = nodeID(t, id)
			ids = append(ids, (*l)[i])
		}
	}
	tk := func() *Task {
		tk, err := New(inst, f.overrides(t, pytestSpec(inst.InstanceID)))
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	testFile, _, _ := strings.Cut(ids[0], "::")

	gold := Evaluate(ctx, env, tk(), api.Prediction{InstanceID: inst.InstanceID, Model: "gold", ModelPatch: ptr(inst.Patch)}, opts())
	if r := gold.Result; r.Outcome != api.OutcomeResolved || r.Report.Integrity != api.IntegrityOK {
		t.Fatalf("gold: %s integrity %q %q (%s)\n%s", r.Outcome, r.Report.Integrity, r.Report.IntegrityReasons, r.Detail, gold.Artifacts.TestOutput)
	}
	_, after, _ := strings.Cut(gold.Artifacts.TestOutput, grading.StartTestOutput)
	between, _, ok := strings.Cut(after, grading.EndTestOutput)
	if !ok || strings.Contains(between, "msb_report") || strings.Contains(between, "PYTEST_ADDOPTS") {
		t.Fatalf("the channel shows between the markers:\n%s", between)
	}

	p := exploitPatch(t, f.gen.RepoDir, inst.BaseCommit, map[string]string{"calc/__init__.py": fakePassedAtExit(testFile, ids)})
	warn := opts()
	warn.Integrity = api.IntegrityWarn
	ev := Evaluate(ctx, env, tk(), api.Prediction{InstanceID: inst.InstanceID, Model: "x", ModelPatch: &p}, warn)
	r := ev.Result
	if r.Outcome != api.OutcomeResolved {
		t.Fatalf("the exploit does not fool the log (the test is void): %s (%s)\n%s", r.Outcome, r.Detail, ev.Artifacts.TestOutput)
	}
	if r.Report.Integrity != api.IntegrityTampered || !hasReason(r.Report.IntegrityReasons, byChannel) {
		t.Fatalf("fake PASSED lines: integrity %q %q\n%s", r.Report.Integrity, r.Report.IntegrityReasons, ev.Artifacts.TestOutput)
	}
	failed := Evaluate(ctx, env, tk(), api.Prediction{InstanceID: inst.InstanceID, Model: "x", ModelPatch: &p}, opts())
	if r := failed.Result; r.Outcome != api.OutcomeUnresolved || r.Reward != 0 || r.Report.Integrity != api.IntegrityTampered {
		t.Fatalf("fake PASSED lines under --integrity fail: %s reward %v integrity %q", r.Outcome, r.Reward, r.Report.Integrity)
	}
}
