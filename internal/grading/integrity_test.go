package grading

import (
	"fmt"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/grading/integrity"
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

// TestChannelReasons: pytest's own report is read by the instance's own
// parser, so its ids take the log's shape whatever the parser does to
// them (psf__requests-5414's "test_basic_auth_str_is_always_native[test-test-Basic"
// is a node id cut at its space, as the dataset lists it): an honest run
// gives no reason under any pytest parser, a log that claims a test the
// report says failed does.
func TestChannelReasons(t *testing.T) {
	const (
		cut  = "tests/t.py::test_auth[test-test-Basic dGVzdDp0ZXN0]"
		path = "tests/t.py::test_file[/tmp/pytest-1/a.txt]"
		fail = "tests/t.py::test_fixed"
	)
	report := func(failed string) []byte {
		var b strings.Builder
		for _, id := range []string{cut, path, fail} {
			outcome := "passed"
			if id == failed {
				outcome = "failed"
			}
			fmt.Fprintf(&b, `{"id": %q, "when": "call", "outcome": %q, "xfail": false}`+"\n", id, outcome)
		}
		return []byte(b.String())
	}
	summary := "PASSED " + cut + "\nPASSED " + path + "\nPASSED " + fail + "\n"
	verbose := cut + " PASSED [ 33%]\n" + path + " PASSED [ 66%]\n" + fail + " PASSED [100%]\n"
	for name, tc := range map[string]struct {
		parse ParseFunc
		log   string
	}{
		"pytest": {ParsePytest, summary}, "pytest_options": {ParsePytestOptions, summary}, "pytest_v2": {ParsePytestV2, summary},
		"seaborn": {ParseSeaborn, summary}, "matplotlib": {ParseMatplotlib, summary}, "swe-smith verbose": {ParsePytestVerbose, verbose},
	} {
		logged := tc.parse(tc.log)
		e := Evaluation{Parse: tc.parse, Channel: integrity.NewChannel("pytest -rA"), Expected: Expected{PassToPass: logged.Names()}}
		if len(logged) < 2 { // the verbose parser reads no id with a space
			t.Fatalf("%s: the log parses to %v", name, logged)
		}
		e.ChannelReport = report("")
		if r := channelReasons(e, Verdict{Statuses: logged}); r != nil {
			t.Errorf("%s, honest: %q", name, r)
		}
		e.ChannelReport = report(fail)
		if r := channelReasons(e, Verdict{Statuses: logged}); len(r) != 1 || !strings.Contains(r[0], fail+" (failed)") {
			t.Errorf("%s, fake PASSED line: %q", name, r)
		}
		e.ChannelReport = nil
		if r := channelReasons(e, Verdict{Statuses: logged}); len(r) != 1 || !strings.Contains(r[0], "which is missing") {
			t.Errorf("%s, no report: %q", name, r)
		}
	}
}

// TestJudgeIntegrityBase: the integrity stage reads the evaluation's base
// files and test command: a hunk that drops a test from a Makefile.am's
// test list of several lines, under a header naming another variable, is
// flagged when the base file is there, and a change of the script the
// test command runs is flagged.
func TestJudgeIntegrityBase(t *testing.T) {
	makefile := "TESTS = tests/a \\\n\ttests/b \\\n\ttests/c\n\nEXTRA_DIST = README\n"
	drop := "diff --git a/Makefile.am b/Makefile.am\n--- a/Makefile.am\n+++ b/Makefile.am\n@@ -2,2 +2,1 @@ EXTRA_DIST = README\n-\ttests/b \\\n \ttests/c\n"
	script := "diff --git a/ci/test.sh b/ci/test.sh\n--- a/ci/test.sh\n+++ b/ci/test.sh\n@@ -1 +1,2 @@\n #!/bin/sh\n+export RUSTFLAGS='--cfg fake'\n"
	for _, tc := range []struct {
		name, patch, command string
		base                 map[string]string
		want                 api.Integrity
	}{
		{"a test dropped, base known", drop, "make check", map[string]string{"Makefile.am": makefile}, api.IntegrityTampered},
		{"the test script", script, "sh ci/test.sh", nil, api.IntegrityTampered},
		{"another script", script, "make check", nil, api.IntegrityOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.patch
			v := Judge(Evaluation{InstanceID: "i", Repo: "pallets/flask", Patch: &p, Log: goodLog, Parse: ParsePytest,
				Expected: Expected{FailToPass: []string{"tests/test_a.py::test_fixed"}}, TestCommand: tc.command, BaseFiles: tc.base})
			if v.Report.Integrity != tc.want {
				t.Fatalf("integrity %q %q, want %q", v.Report.Integrity, v.Report.IntegrityReasons, tc.want)
			}
		})
	}
}
