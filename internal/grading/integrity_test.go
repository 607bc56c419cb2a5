package grading

import (
	"testing"

	"github.com/minisandbox/msb/internal/api"
)

// TestJudgeIntegrity: every verdict passes the integrity stage. A patch
// that adds a conftest.py is reported tampered; under fail (the default)
// it is unresolved with reward 0 and the reason in the detail, under warn
// the harness's verdict and reward stand; an honest patch is ok either way.
func TestJudgeIntegrity(t *testing.T) {
	honest := "diff --git a/src/a.py b/src/a.py\n--- a/src/a.py\n+++ b/src/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
	tamper := honest + "diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n+++ b/conftest.py\n@@ -0,0 +1 @@\n+import unittest; unittest.TestCase.assertEqual = lambda *a, **k: None\n"
	testPatch := "diff --git a/tests/test_a.py b/tests/test_a.py\n--- a/tests/test_a.py\n+++ b/tests/test_a.py\n@@ -1 +1,2 @@\n def test_kept(): pass\n+def test_fixed(): pass\n"
	exp := Expected{FailToPass: []string{"tests/test_a.py::test_fixed"}, PassToPass: []string{"tests/test_a.py::test_kept"}}
	for _, tc := range []struct {
		name      string
		patch     string
		mode      api.IntegrityMode
		integrity api.Integrity
		outcome   api.Outcome
		reward    float64
	}{
		{"honest, fail", honest, api.IntegrityFail, api.IntegrityOK, api.OutcomeResolved, 1},
		{"honest, warn", honest, api.IntegrityWarn, api.IntegrityOK, api.OutcomeResolved, 1},
		{"tampered, default is fail", tamper, "", api.IntegrityTampered, api.OutcomeUnresolved, 0},
		{"tampered, fail", tamper, api.IntegrityFail, api.IntegrityTampered, api.OutcomeUnresolved, 0},
		{"tampered, warn", tamper, api.IntegrityWarn, api.IntegrityTampered, api.OutcomeResolved, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.patch
			v := Judge(Evaluation{InstanceID: "i", Repo: "pallets/flask", Patch: &p, Log: goodLog, Parse: ParsePytest,
				Expected: exp, TestPatch: testPatch, Integrity: tc.mode})
			if v.Report.Integrity != tc.integrity || v.Outcome != tc.outcome || v.Report.Resolved != (tc.outcome == api.OutcomeResolved) {
				t.Fatalf("integrity %q outcome %q resolved %v, want %q %q", v.Report.Integrity, v.Outcome, v.Report.Resolved, tc.integrity, tc.outcome)
			}
			for _, mode := range []api.RewardMode{api.RewardBinary, api.RewardFraction} {
				if r := v.Reward(mode); r != tc.reward {
					t.Errorf("reward (%s) %v, want %v", mode, r, tc.reward)
				}
			}
			if tc.integrity == api.IntegrityTampered {
				if len(v.Report.IntegrityReasons) != 1 || v.Report.IntegrityReasons[0][:len("conftest.py: ")] != "conftest.py: " {
					t.Errorf("reasons %q", v.Report.IntegrityReasons)
				}
			} else if len(v.Report.IntegrityReasons) != 0 {
				t.Errorf("reasons %q for an ok patch", v.Report.IntegrityReasons)
			}
			if tc.outcome == api.OutcomeUnresolved && (v.Resolution != api.ResolvedNo || v.Detail == "") {
				t.Errorf("voided verdict: resolution %q detail %q", v.Resolution, v.Detail)
			}
		})
	}
}
