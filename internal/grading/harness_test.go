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
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/privtest"
)

// harnessCase is one grading question, in testdata/harness/harness.py's terms.
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
	dir := os.Getenv("MSB_TEST_SWEBENCH_GRADING")
	if dir == "" {
		privtest.Skip(t, "MSB_TEST_SWEBENCH_GRADING is not set: make test sets it (make test-venv installs testdata/harness/requirements.txt)")
	}
	var verdicts []harnessVerdict
	runHarness(t, cases, &verdicts, dir)
	if len(verdicts) != len(cases) {
		t.Fatalf("harness.py answered %d verdicts for %d cases", len(verdicts), len(cases))
	}
	return verdicts
}

// runHarness runs testdata/harness/harness.py with args under
// MSB_TEST_PYTHON, in as JSON on its stdin, and decodes its stdout into out.
func runHarness(t *testing.T, in, out any, args ...string) {
	t.Helper()
	py := privtest.Python(t, "testdata/harness/harness.py")
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, append([]string{filepath.Join("testdata", "harness", "harness.py")}, args...)...)
	cmd.Stdin = bytes.NewReader(b)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	res, err := cmd.Output()
	if err != nil {
		t.Fatalf("harness.py %v (%s): %v\n%s", args, py, err, stderr.Bytes())
	}
	if err := json.Unmarshal(res, out); err != nil {
		t.Fatalf("harness.py %v answered: %v", args, err)
	}
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

// TestSuiteRanMatchesHarness asks SuiteRan and the harness's SUITE_RAN
// (swebench 5.0.2's get_logs_eval) about the same logs: suiteRanLogs and
// 3000 random ones made of the runners' words, counts with and without a
// zero, and the line ends the patterns anchor on.
func TestSuiteRanMatchesHarness(t *testing.T) {
	dir := os.Getenv("MSB_TEST_SWEBENCH_GRADING")
	if dir == "" {
		privtest.Skip(t, "MSB_TEST_SWEBENCH_GRADING is not set: make test sets it (make test-venv installs testdata/harness/requirements.txt)")
	}
	var logs []string
	for log := range suiteRanLogs {
		logs = append(logs, log)
	}
	words := []string{"Executed ", " of ", "TOTAL: ", " SUCCESS", " FAILED", " passing", "Tests:", "Test Suites:",
		" skipped,", " total", "# tests ", " spec", " specs, ", " failure", " failures", "': ok", "0", "1", "12", "00", " ", "  ", "\n", "\t", "x"}
	r := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		var b bytes.Buffer
		for range 1 + r.IntN(10) {
			b.WriteString(words[r.IntN(len(words))])
		}
		logs = append(logs, b.String())
	}
	var want []bool
	runHarness(t, logs, &want, dir, "suiteran")
	if len(want) != len(logs) {
		t.Fatalf("harness.py answered %d for %d logs", len(want), len(logs))
	}
	ran := 0
	for i, log := range logs {
		if SuiteRan(log) != want[i] {
			t.Errorf("SuiteRan(%q) = %v, the harness says %v", log, !want[i], want[i])
		}
		if want[i] {
			ran++
		}
	}
	t.Logf("%d logs, %d with a sign that tests ran", len(logs), ran)
}
