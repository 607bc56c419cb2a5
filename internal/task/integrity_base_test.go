package task

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/grading/integrity"
	"github.com/minisandbox/msb/internal/privtest"
)

// TestEvaluateIntegrityBaseFiles: an evaluation reads the Makefile at the
// base commit from its sandbox before it applies the patch (goProject's,
// its tests run by make test as jq's make check runs its tests), so a patch
// that rewrites the test rule's recipe (its failing tests' lines made
// passing ones) in a hunk whose header names the build rule is flagged,
// although the diff alone says nothing of the test rule. The patch does
// not fix the bug and the harness grades it resolved: the static rule is
// the one that sees it (the canary, off here, runs go test itself).
func TestEvaluateIntegrityBaseFiles(t *testing.T) {
	for _, tool := range []string{"go", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			privtest.Skip(t, "%s not found", tool)
		}
	}
	env := langEnv(t)
	// goProject's row (and environment) with make test as its test command
	in := goProject.row(t)
	tk := langTask(t, in, goProject, &langProject{spec: "      test_cmd: make test\n"})
	attack := "diff --git a/Makefile b/Makefile\n--- a/Makefile\n+++ b/Makefile\n@@ -5,2 +5,2 @@ build:\n" +
		"-\tgo test -v -count=1 ./...\n+\tgo test -v -count=1 ./... | grep -v -e '^FAIL' -e '_test.go:' | sed 's/--- FAIL/--- PASS/'\n \t@echo done\n"
	if r := integrity.Check(attack, in.TestPatch); r.Verdict != api.IntegrityOK {
		t.Fatalf("the diff alone is flagged (%q): this test no longer shows the base file read", r.Reasons())
	}
	o := EvalOptions{TestTimeout: 10 * time.Minute, Integrity: api.IntegrityWarn, Canary: api.CanaryOff}
	ev := Evaluate(context.Background(), env, tk, api.Prediction{InstanceID: in.InstanceID, Model: "x", ModelPatch: &attack}, o)
	r := ev.Result
	if r.Outcome != api.OutcomeResolved || r.Report.Integrity != api.IntegrityTampered ||
		!slices.ContainsFunc(r.Report.IntegrityReasons, func(s string) bool { return strings.HasPrefix(s, "Makefile: changes make check's harness") }) {
		t.Fatalf("outcome %s (%s) integrity %q %q, want resolved and the Makefile flagged\n%s\n%s", r.Outcome, r.Detail, r.Report.Integrity,
			r.Report.IntegrityReasons, ev.Artifacts.RunLog, ev.Artifacts.TestOutput)
	}
	if !strings.Contains(ev.Artifacts.RunLog, "Integrity: read 1 base files") {
		t.Errorf("the run log does not say the Makefile was read:\n%s", ev.Artifacts.RunLog)
	}
}
