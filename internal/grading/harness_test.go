package grading

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/privtest"
)

// harnessCase is one grading question, in testdata/harness/grade.py's terms.
type harnessCase struct {
	StatusMap       StatusMap `json:"status_map"`
	F2P             []string  `json:"f2p"`
	P2P             []string  `json:"p2p"`
	F2F             []string  `json:"f2f"`
	P2F             []string  `json:"p2f"`
	EvalType        EvalType  `json:"eval_type"`
	CalculateToFail bool      `json:"calculate_to_fail"`
}

type harnessVerdict struct {
	TestsStatus api.TestsStatus `json:"tests_status"`
	Resolution  api.Resolution  `json:"resolution"`
}

// harnessGrade answers cases with the harness's grading code: the swebench
// package in MSB_TEST_SWEBENCH_GRADING, run by MSB_TEST_PYTHON.
func harnessGrade(t *testing.T, cases []harnessCase) []harnessVerdict {
	t.Helper()
	py, dir := os.Getenv("MSB_TEST_PYTHON"), os.Getenv("MSB_TEST_SWEBENCH_GRADING")
	if py == "" || dir == "" {
		privtest.Skip(t, "MSB_TEST_PYTHON and MSB_TEST_SWEBENCH_GRADING are not set: make test sets them (make test-venv installs testdata/harness/requirements.txt)")
	}
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join("testdata", "harness", "grade.py"), dir)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the harness's grading (%s %s): %v\n%s", py, dir, err, stderr.Bytes())
	}
	var verdicts []harnessVerdict
	if err := json.Unmarshal(out, &verdicts); err != nil || len(verdicts) != len(cases) {
		t.Fatalf("grade.py answered %d verdicts for %d cases: %v", len(verdicts), len(cases), err)
	}
	return verdicts
}

// randomCase draws test lists and a status map from small pools, so that
// names recur across lists and statuses, missing tests and statuses the
// harness does not know all occur. Names keep their brackets balanced: the
// harness's prefix match of ids truncated inside "[...]" (_resolve_case)
// serves its parsers, which keep a parameter's spaces; ours cut a name at
// the first space, as the parsers that made the datasets' lists did, so the
// truncated id is the key itself.
func randomCase(r *rand.Rand) harnessCase {
	names := []string{"t_a", "t_b", "t_c", "m.py::t[1]", "m.py::t[2]", "m.py::T::t", "test_x (m.T)", "t_d", "t_e", "t_f"}
	statuses := []Status{Passed, Failed, Skipped, Error, XFail, "XPASS"}
	pick := func() []string {
		var out []string
		for _, n := range names {
			if r.IntN(4) == 0 {
				out = append(out, n)
			}
		}
		return out
	}
	c := harnessCase{StatusMap: StatusMap{}, F2P: pick(), P2P: pick(), F2F: pick(), P2F: pick(),
		EvalType: PassAndFail, CalculateToFail: r.IntN(2) == 0}
	if r.IntN(4) == 0 {
		c.EvalType = FailOnly
	}
	for _, n := range names {
		if r.IntN(3) != 0 {
			c.StatusMap[n] = statuses[r.IntN(len(statuses))]
		}
	}
	return c
}

// TestGradeMatchesHarness puts the same questions to Grade and ResolutionOf
// and to the harness's get_eval_tests_report and get_resolution_status
// (swebench 5.0.2, testdata/harness/requirements.txt): 2000 random cases
// and the corner cases below must get the same lists, in the same order,
// and the same resolution.
func TestGradeMatchesHarness(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := []harnessCase{
		{StatusMap: StatusMap{}, EvalType: PassAndFail},                                                                  // nothing expected: FULL
		{StatusMap: StatusMap{"a": Skipped}, F2P: []string{"a"}, EvalType: PassAndFail},                                  // a skipped FAIL_TO_PASS fails
		{StatusMap: StatusMap{"a": Passed, "b": Skipped}, F2P: []string{"a"}, P2P: []string{"b"}, EvalType: PassAndFail}, // maintained
		{StatusMap: StatusMap{"a": Passed}, F2P: []string{"a", "gone"}, EvalType: PassAndFail},                           // missing fails: PARTIAL
		{StatusMap: StatusMap{}, F2P: []string{"gone"}, EvalType: FailOnly},                                              // missing succeeds when FAIL_ONLY
		{StatusMap: StatusMap{"a": "XPASS"}, F2P: []string{"a"}, P2P: []string{"a"}, EvalType: PassAndFail},              // unknown: neither list
	}
	for range 2000 {
		cases = append(cases, randomCase(r))
	}
	want := harnessGrade(t, cases)
	for i, c := range cases {
		exp := Expected{FailToPass: c.F2P, PassToPass: c.P2P, FailToFail: c.F2F, PassToFail: c.P2F}
		got := Grade(c.StatusMap, exp, Options{EvalType: c.EvalType, CalculateToFail: c.CalculateToFail})
		if res := ResolutionOf(got); !reflect.DeepEqual(nonNil(got), nonNil(want[i].TestsStatus)) || res != want[i].Resolution {
			t.Errorf("case %d %s:\n msb     %s %s\n harness %s %s", i, mustJSON(c), mustJSON(got), res,
				mustJSON(want[i].TestsStatus), want[i].Resolution)
		}
	}
}

// nonNil makes every list non-nil, as JSON's [] and Grade's lists are.
func nonNil(ts api.TestsStatus) api.TestsStatus {
	for _, o := range []*api.Outcomes{&ts.FailToPass, &ts.PassToPass, &ts.FailToFail, &ts.PassToFail} {
		if o.Success == nil {
			o.Success = []string{}
		}
		if o.Failure == nil {
			o.Failure = []string{}
		}
	}
	return ts
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// realDataset holds the rows of the logs in testdata/harness/logs.
const realDataset = "../../../shared/datasets/swe-bench-verified.jsonl"

// TestJudgeMatchesHarnessOnRealLogs grades real evaluation logs twice: with
// Judge, as msb eval does, and with the harness's own get_eval_report
// (swebench 4.1.0, the test venv's, through grade.py regrade), which must
// agree on resolved and on every per-test list. The logs are msb's test
// output of SWE-bench Verified instances (testdata/harness/logs/<gold|empty>/
// <instance>/, from docs/swe-bench.md's v9 and v10): a resolved gold patch,
// unresolved empty patches, a gold patch failing one PASS_TO_PASS test, and
// a collection error that runs no test at all.
func TestJudgeMatchesHarnessOnRealLogs(t *testing.T) {
	py := os.Getenv("MSB_TEST_PYTHON")
	if py == "" {
		privtest.Skip(t, "MSB_TEST_PYTHON is not set: make test sets it")
	}
	if _, err := os.Stat(realDataset); err != nil {
		t.Skipf("real dataset not present: %v", err)
	}
	out, err := exec.Command(py, "-c", "import importlib.util, os; "+
		"print(os.path.dirname(list(importlib.util.find_spec('swebench').submodule_search_locations)[0]))").Output()
	if err != nil {
		privtest.Skip(t, "%s has no swebench (make test-venv installs internal/spec/testdata/requirements.txt): %v", py, err)
	}
	harnessDir := strings.TrimSpace(string(out))
	logs, _ := filepath.Glob(filepath.Join("testdata", "harness", "logs", "*", "*", "test_output.txt"))
	if len(logs) == 0 {
		t.Fatal("no logs in testdata/harness/logs")
	}
	var ids []string
	for _, l := range logs {
		ids = append(ids, filepath.Base(filepath.Dir(l)))
	}
	rows, rowErrs, err := dataset.Load(realDataset, dataset.Filter{IDs: ids})
	if err != nil || len(rowErrs) > 0 {
		t.Fatalf("loading %s: %v %v", realDataset, err, rowErrs)
	}
	byID := map[string]dataset.Instance{}
	for _, r := range rows {
		byID[r.InstanceID] = r
	}
	graded := t.TempDir()
	for _, l := range logs {
		dir := filepath.Dir(l)
		kind, id := filepath.Base(filepath.Dir(dir)), filepath.Base(dir)
		writeJudged(t, filepath.Join(graded, kind, id), l, byID[id], kind == "gold")
	}
	cmd := exec.Command(py, filepath.Join("testdata", "harness", "grade.py"), harnessDir, "regrade", realDataset, graded)
	res, err := cmd.CombinedOutput()
	t.Logf("%s", res)
	if err != nil || !strings.Contains(string(res), fmt.Sprintf("%d of %d evaluations agree", len(logs), len(logs))) {
		t.Fatalf("the harness grades these logs otherwise (%v): see above", err)
	}
}

// writeJudged judges the log of in (its gold patch, or an empty one) with
// its parser, as msb eval does, and writes what grade.py regrade reads:
// report.json, test_output.txt and the patch.
func writeJudged(t *testing.T, dir, log string, in dataset.Instance, gold bool) {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	parsers := map[string]string{"astropy/astropy": ParserPytestV2}
	parse, err := Lookup(parsers[in.Repo])
	if err != nil {
		t.Fatalf("%s: %v", in.InstanceID, err)
	}
	patch := ""
	if gold {
		patch = in.Patch
	}
	v := Judge(Evaluation{InstanceID: in.InstanceID, Repo: in.Repo, Patch: &patch, GradeEmpty: true, Log: string(b), Parse: parse,
		Expected: Expected{FailToPass: in.FailToPass, PassToPass: in.PassToPass}})
	report, err := json.Marshal(map[string]api.InstanceReport{in.InstanceID: v.Report})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{"report.json": report, "test_output.txt": b, "patch.diff": []byte(patch)} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
