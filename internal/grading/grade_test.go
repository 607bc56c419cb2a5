package grading

import (
	"encoding/json"
	"errors"
	"github.com/minisandbox/msb/internal/api"
	"reflect"
	"strings"
	"testing"
)

func TestGrade(t *testing.T) {
	sm := StatusMap{
		"p": Passed, "x": XFail, "f": Failed, "e": Error, "s": Skipped, "odd": Status("XPASS"),
	}
	tests := []struct {
		name    string
		exp     Expected
		opt     Options
		wantF2P api.Outcomes
		wantP2P api.Outcomes
		res     api.Resolution
	}{
		{"passed and xfail pass", Expected{FailToPass: []string{"p", "x"}, PassToPass: []string{"p"}},
			Options{}, oc([]string{"p", "x"}, nil), oc([]string{"p"}, nil), api.ResolvedFull},
		{"missing f2p fails", Expected{FailToPass: []string{"p", "gone"}},
			Options{}, oc([]string{"p"}, []string{"gone"}), oc(nil, nil), api.ResolvedPartial},
		{"missing p2p fails", Expected{FailToPass: []string{"p"}, PassToPass: []string{"gone"}},
			Options{}, oc([]string{"p"}, nil), oc(nil, []string{"gone"}), api.ResolvedNo},
		{"failed and error fail", Expected{FailToPass: []string{"f", "e"}},
			Options{}, oc(nil, []string{"f", "e"}), oc(nil, nil), api.ResolvedNo},
		{"skipped f2p fails", Expected{FailToPass: []string{"s"}},
			Options{}, oc(nil, []string{"s"}), oc(nil, nil), api.ResolvedNo},
		{"skipped p2p is maintained", Expected{FailToPass: []string{"p"}, PassToPass: []string{"s"}},
			Options{}, oc([]string{"p"}, nil), oc([]string{"s"}, nil), api.ResolvedFull},
		{"unknown status in neither list", Expected{FailToPass: []string{"p", "odd"}, PassToPass: []string{"odd"}},
			Options{}, oc([]string{"p"}, nil), oc(nil, nil), api.ResolvedFull},
		{"empty lists resolve", Expected{},
			Options{}, oc(nil, nil), oc(nil, nil), api.ResolvedFull},
		{"partial needs p2p intact", Expected{FailToPass: []string{"p", "f"}, PassToPass: []string{"f"}},
			Options{}, oc([]string{"p"}, []string{"f"}), oc(nil, []string{"f"}), api.ResolvedNo},
		{"no f2p success is NO", Expected{FailToPass: []string{"f"}, PassToPass: []string{"p"}},
			Options{}, oc(nil, []string{"f"}), oc([]string{"p"}, nil), api.ResolvedNo},
		{"fail only: missing succeeds", Expected{FailToPass: []string{"gone", "e", "s"}, PassToPass: []string{"gone"}},
			Options{EvalType: FailOnly}, oc([]string{"gone", "e", "s"}, nil), oc([]string{"gone"}, nil), api.ResolvedFull},
		{"fail only: FAILED fails", Expected{FailToPass: []string{"f"}, PassToPass: []string{"p"}},
			Options{EvalType: FailOnly}, oc(nil, []string{"f"}), oc([]string{"p"}, nil), api.ResolvedNo},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := Grade(sm, tc.exp, tc.opt)
			if !reflect.DeepEqual(ts.FailToPass, tc.wantF2P) {
				t.Errorf("FAIL_TO_PASS = %+v, want %+v", ts.FailToPass, tc.wantF2P)
			}
			if !reflect.DeepEqual(ts.PassToPass, tc.wantP2P) {
				t.Errorf("PASS_TO_PASS = %+v, want %+v", ts.PassToPass, tc.wantP2P)
			}
			if got := ResolutionOf(ts); got != tc.res {
				t.Errorf("api.Resolution = %s, want %s", got, tc.res)
			}
			if Resolved(ts) != (tc.res == api.ResolvedFull) {
				t.Errorf("Resolved = %v with resolution %s", Resolved(ts), tc.res)
			}
		})
	}
}

func oc(success, failure []string) api.Outcomes {
	if success == nil {
		success = []string{}
	}
	if failure == nil {
		failure = []string{}
	}
	return api.Outcomes{Success: success, Failure: failure}
}

func TestGradeToFail(t *testing.T) {
	sm := StatusMap{"a": Passed, "b": Failed}
	exp := Expected{FailToFail: []string{"a"}, PassToFail: []string{"b"}}
	if ts := Grade(sm, exp, Options{}); len(ts.FailToFail.Success)+len(ts.PassToFail.Failure) != 0 {
		t.Errorf("to-fail lists graded without CalculateToFail: %+v", ts)
	}
	ts := Grade(sm, exp, Options{CalculateToFail: true})
	if !reflect.DeepEqual(ts.FailToFail, oc([]string{"a"}, nil)) || !reflect.DeepEqual(ts.PassToFail, oc(nil, []string{"b"})) {
		t.Errorf("to-fail lists = %+v / %+v", ts.FailToFail, ts.PassToFail)
	}
}

func TestTestsStatusJSON(t *testing.T) {
	ts := Grade(StatusMap{"a": Passed}, Expected{FailToPass: []string{"a"}}, Options{})
	b, err := json.Marshal(ts)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"FAIL_TO_PASS":{"success":["a"],"failure":[]},"PASS_TO_PASS":{"success":[],"failure":[]},` +
		`"FAIL_TO_FAIL":{"success":[],"failure":[]},"PASS_TO_FAIL":{"success":[],"failure":[]}}`
	if string(b) != want {
		t.Errorf("json = %s\nwant %s", b, want)
	}
}

func TestReward(t *testing.T) {
	tests := []struct {
		name       string
		sm         StatusMap
		exp        Expected
		binary     float64
		fraction   float64
		resolution api.Resolution
	}{
		{"resolved", StatusMap{"a": Passed, "b": Passed}, Expected{FailToPass: []string{"a"}, PassToPass: []string{"b"}}, 1, 1, api.ResolvedFull},
		{"half", StatusMap{"a": Passed, "b": Failed}, Expected{FailToPass: []string{"a", "b"}}, 0, 0.5, api.ResolvedPartial},
		{"one of four", StatusMap{"a": Passed}, Expected{FailToPass: []string{"a", "b"}, PassToPass: []string{"c", "d"}}, 0, 0.25, api.ResolvedNo},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := Grade(tc.sm, tc.exp, Options{})
			if got := RewardOf(ts, api.RewardBinary); got != tc.binary {
				t.Errorf("binary reward = %v, want %v", got, tc.binary)
			}
			if got := RewardOf(ts, api.RewardFraction); got != tc.fraction {
				t.Errorf("fraction reward = %v, want %v", got, tc.fraction)
			}
			if got := ResolutionOf(ts); got != tc.resolution {
				t.Errorf("resolution = %v, want %v", got, tc.resolution)
			}
		})
	}
}

func TestEvalTypeFor(t *testing.T) {
	for repo, want := range map[string]EvalType{
		"django/django": PassAndFail, "sympy/sympy": PassAndFail, "chartjs/Chart.js": FailOnly,
		"markedjs/marked": FailOnly, "processing/p5.js": FailOnly, "swesmith/foo.1234": PassAndFail,
	} {
		if got := EvalTypeFor(repo); got != want {
			t.Errorf("EvalTypeFor(%s) = %s, want %s", repo, got, want)
		}
	}
}

const goodLog = `+ git apply -v -
Checking patch tests/test_a.py...
+ : '>>>>> Start Test Output'
+ pytest -rA tests/test_a.py
PASSED tests/test_a.py::test_fixed
PASSED tests/test_a.py::test_kept
FAILED tests/test_a.py::test_other - assert 0
+ : '>>>>> End Test Output'
PASSED tests/test_a.py::test_after_end_marker
`

// suiteRanLogs are runners' summaries and whether each is evidence that
// tests ran: a count of zero, or a line that only looks alike, is not.
var suiteRanLogs = map[string]bool{
	"Executed 12 of 12 SUCCESS": true, "Executed 0 of 0": false,
	"TOTAL: 3 SUCCESS": true, "TOTAL: 0 FAILED": false,
	"  25 passing (2s)": true, "0 passing": false,
	"Tests:       1 failed, 40 passed, 41 total": true, "Tests:       0 total": false,
	"Test Suites: 1 skipped, 4 passed, 5 total": true, "Test Suites: 0 total": false,
	"TAP version 13\n# tests 7\n# pass 7": true, "  # tests 7": false,
	"1562 specs, 0 failures": true, "0 specs, 0 failures": false,
	"rendering 'circle-style': ok": true, "rendering 'circle-style': ok, then": false,
	"=== 5 passed in 0.1s ===": false,
}

func TestSuiteRan(t *testing.T) {
	for log, want := range suiteRanLogs {
		if got := SuiteRan(log); got != want {
			t.Errorf("SuiteRan(%q) = %v, want %v", log, got, want)
		}
	}
}

func TestParseEvalLog(t *testing.T) {
	tests := []struct {
		name    string
		log     string
		want    StatusMap
		problem LogProblem
	}{
		{"between markers", goodLog, StatusMap{
			"tests/test_a.py::test_fixed": Passed, "tests/test_a.py::test_kept": Passed, "tests/test_a.py::test_other": Failed,
		}, LogOK},
		{"falls back to whole log", "+ : '>>>>> Start Test Output'\n+ : '>>>>> End Test Output'\nPASSED t.py::x\n",
			StatusMap{"t.py::x": Passed}, LogOK},
		{"no markers", "PASSED t.py::x\n", StatusMap{}, LogMarkersMissing},
		{"apply failed", goodLog + ">>>>> Patch Apply Failed\n", StatusMap{}, LogPatchFailed},
		{"timed out", goodLog + ">>>>> Tests Timed Out\n", StatusMap{}, LogTestsTimedOut},
		{"errored", goodLog + ">>>>> Tests Errored\n", StatusMap{}, LogTestsErrored},
		{"reset failed", goodLog + ">>>>> Reset Failed\n", StatusMap{}, LogResetFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, problem := ParseEvalLog(ParsePytest, tc.log)
			if problem != tc.problem {
				t.Errorf("problem = %q, want %q", problem, tc.problem)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("statuses = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	patch, empty := "diff --git a/x b/x\n", " \n"
	exp := Expected{FailToPass: []string{"tests/test_a.py::test_fixed"}, PassToPass: []string{"tests/test_a.py::test_kept"}}
	base := Evaluation{InstanceID: "i", Repo: "pallets/flask", Patch: &patch, Log: goodLog, Parse: ParsePytest, Expected: exp}
	with := func(f func(*Evaluation)) Evaluation { e := base; f(&e); return e }
	tests := []struct {
		name    string
		e       Evaluation
		outcome api.Outcome
		applied bool
		isNone  bool
	}{
		{"resolved", base, api.OutcomeResolved, true, false},
		{"unresolved", with(func(e *Evaluation) { e.Expected.FailToPass = []string{"tests/test_a.py::test_other"} }), api.OutcomeUnresolved, true, false},
		{"missing test unresolved", with(func(e *Evaluation) { e.Expected.PassToPass = []string{"gone"} }), api.OutcomeUnresolved, true, false},
		{"nil patch", with(func(e *Evaluation) { e.Patch = nil }), api.OutcomeEmptyPatch, false, true},
		{"empty patch", with(func(e *Evaluation) { e.Patch = &empty }), api.OutcomeEmptyPatch, false, false},
		{"empty patch graded", with(func(e *Evaluation) {
			e.Patch, e.GradeEmpty = &empty, true
			e.Log = "+ : '>>>>> Start Test Output'\nFAILED tests/test_a.py::test_fixed\nPASSED tests/test_a.py::test_kept\n+ : '>>>>> End Test Output'\n"
		}), api.OutcomeUnresolved, true, false},
		{"apply failed", with(func(e *Evaluation) { e.ApplyErr = errors.New("git apply: corrupt patch") }), api.OutcomePatchApplyFailed, false, false},
		{"apply failed marker", with(func(e *Evaluation) { e.Log += ApplyPatchFail }), api.OutcomePatchApplyFailed, false, false},
		{"timeout", with(func(e *Evaluation) { e.TimedOut = true }), api.OutcomeTestTimeout, false, false},
		{"timeout marker", with(func(e *Evaluation) { e.Log += TestsTimeout }), api.OutcomeTestTimeout, false, false},
		{"env build", with(func(e *Evaluation) { e.EnvBuildErr = errors.New("pip failed") }), api.OutcomeEnvBuildFailed, false, false},
		{"infra", with(func(e *Evaluation) { e.InfraErr = errors.New("sandbox died") }), api.OutcomeInfraError, false, false},
		{"no markers is infra, not unresolved", with(func(e *Evaluation) { e.Log = "PASSED tests/test_a.py::test_fixed\n" }), api.OutcomeInfraError, false, false},
		{"no parser", with(func(e *Evaluation) { e.Parse = nil }), api.OutcomeInfraError, false, false},
		{"passes with a failing exit code are not trusted", with(func(e *Evaluation) {
			e.Log = strings.Replace(goodLog, "FAILED tests/test_a.py::test_other - assert 0\n", "", 1) + "\n" + TestExitCode + ": 1\n"
		}), api.OutcomeUnresolved, false, false},
		{"an exit code of 0 is consistent", with(func(e *Evaluation) { e.Log += "\n" + TestExitCode + ": 0\n" }), api.OutcomeResolved, true, false},
		// FAIL_ONLY counts absent tests as passed: a log with no result is
		// resolved only where a runner says it ran tests.
		{"fail-only suite that never ran", with(func(e *Evaluation) {
			e.Repo, e.Log = "markedjs/marked", "+ : '"+StartTestOutput+"'\nError: Cannot find module 'jasmine'\nExecuted 0 of 0\n+ : '"+EndTestOutput+"'\n"
		}), api.OutcomeUnresolved, false, false},
		{"fail-only suite that ran clean", with(func(e *Evaluation) {
			e.Repo, e.Log = "markedjs/marked", "+ : '"+StartTestOutput+"'\n1562 specs, 0 failures\n+ : '"+EndTestOutput+"'\n"
		}), api.OutcomeResolved, true, false},
		{"pass-and-fail log with no result", with(func(e *Evaluation) {
			e.Log = "+ : '" + StartTestOutput + "'\nImportError: no module\n+ : '" + EndTestOutput + "'\n"
		}), api.OutcomeUnresolved, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.e)
			if v.Outcome != tc.outcome {
				t.Errorf("outcome = %s (%s), want %s", v.Outcome, v.Detail, tc.outcome)
			}
			if v.Report.PatchSuccessfullyApplied != tc.applied {
				t.Errorf("patch_successfully_applied = %v, want %v", v.Report.PatchSuccessfullyApplied, tc.applied)
			}
			if v.Report.PatchIsNone != tc.isNone || v.Report.PatchExists == tc.isNone {
				t.Errorf("patch_is_None/patch_exists = %v/%v", v.Report.PatchIsNone, v.Report.PatchExists)
			}
			if v.Report.Resolved != (tc.outcome == api.OutcomeResolved) {
				t.Errorf("resolved = %v with outcome %s", v.Report.Resolved, v.Outcome)
			}
			if (v.Report.TestsStatus != nil) != tc.applied {
				t.Errorf("tests_status present = %v with outcome %s", v.Report.TestsStatus != nil, v.Outcome)
			}
		})
	}
}

func TestReportFileJSON(t *testing.T) {
	patch := "diff"
	v := Judge(Evaluation{InstanceID: "a__b-1", Patch: &patch, Log: goodLog, Parse: ParsePytest,
		Expected: Expected{FailToPass: []string{"tests/test_a.py::test_fixed"}}})
	b, err := json.Marshal(api.ReportFile{"a__b-1": v.Report})
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	r := back["a__b-1"]
	for _, k := range []string{"patch_is_None", "patch_exists", "patch_successfully_applied", "resolved", "tests_status"} {
		if _, ok := r[k]; !ok {
			t.Errorf("report.json lacks %q: %s", k, b)
		}
	}
	if r["resolved"] != true {
		t.Errorf("resolved = %v", r["resolved"])
	}
}

func TestSummarize(t *testing.T) {
	dataset := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	submitted := []string{"a", "b", "c", "d", "e", "f", "h", "zz"}
	finished := map[string]Finished{
		"a": {Outcome: api.OutcomeResolved}, "b": {Outcome: api.OutcomeUnresolved}, "c": {Outcome: api.OutcomeEmptyPatch},
		"d": {Outcome: api.OutcomePatchApplyFailed}, "e": {Outcome: api.OutcomeTestTimeout}, // f: submitted, never finished
		"h": {Outcome: api.OutcomeEnvBuildFailed, Detail: "pip failed\nlong log"},
	}
	s := Summarize("m", "r1", dataset, submitted, finished)
	check := func(name string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	ids := func(s ...string) api.List[string] { return s }
	check("total", s.TotalInstances, 8)
	check("submitted", s.SubmittedInstances, 8)
	check("completed_ids", s.CompletedIDs, ids("a", "b"))
	check("resolved_ids", s.ResolvedIDs, ids("a"))
	check("unresolved_ids", s.UnresolvedIDs, ids("b"))
	check("empty_patch_ids", s.EmptyPatchIDs, ids("c"))
	check("error_ids", s.ErrorIDs, ids("d", "e", "f", "h"))
	check("infra_failure_ids", s.InfraFailureIDs, ids("h"))
	check("failure_reasons", s.FailureReasons, api.Map[string, string]{"h": "pip failed"})
	check("incomplete_ids", s.IncompleteIDs, ids("g"))
	check("outcomes", s.Outcomes[api.OutcomeTestTimeout], ids("e"))
	check("counts", []int{s.CompletedInstances, s.ResolvedInstances, s.UnresolvedInstances, s.EmptyPatchInstances, s.ErrorInstances, s.InfraFailureInstances},
		[]int{2, 1, 1, 1, 4, 1})
	check("model", s.Model+"/"+s.RunID, "m/r1")
}

// TestSummaryJSONHasNoNulls: every list of an empty summary is [] and every
// map {}, as the harness writes them.
func TestSummaryJSONHasNoNulls(t *testing.T) {
	b, err := json.Marshal(Summarize("m", "r", nil, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "null") {
		t.Fatalf("null in %s", b)
	}
}
