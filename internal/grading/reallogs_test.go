package grading_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/spec"
)

// realDataset holds the rows of the logs in testdata/harness/logs.
const realDataset = "../../../shared/datasets/swe-bench-verified.jsonl"

// TestJudgeMatchesHarnessOnRealLogs grades real evaluation logs twice: with
// Judge and the parser the instance's spec names, as msb eval does, and with
// the harness's own get_eval_report (swebench 4.1.0, the test venv's,
// through harness.py regrade), which must agree on resolved and on every
// per-test list. The logs are msb's test output of SWE-bench Verified
// instances (testdata/harness/logs/<gold|empty>/<instance>/, from
// docs/swe-bench.md's v9, v10 and v11), one or more per parser the harness
// uses for them: pytest (flask, pytest), pytest_options (requests,
// pylint), pytest_v2 (astropy; sphinx through tox), sympy. Among them are
// resolved gold patches, unresolved empty patches, a gold patch that fails
// one PASS_TO_PASS test and a collection error that runs no test at all.
func TestJudgeMatchesHarnessOnRealLogs(t *testing.T) {
	py := privtest.Python(t, "the harness's get_eval_report (swebench of internal/spec/testdata/requirements.txt)")
	if _, err := os.Stat(realDataset); err != nil {
		t.Skipf("real dataset not present: %v", err)
	}
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
	cmd := exec.Command(py, filepath.Join("testdata", "harness", "harness.py"), "-", "regrade", realDataset, graded)
	res, err := cmd.CombinedOutput()
	t.Logf("%s", res)
	if err != nil || !strings.Contains(string(res), fmt.Sprintf("%d of %d evaluations agree", len(logs), len(logs))) {
		t.Fatalf("the harness grades these logs otherwise (%v): see above", err)
	}
}

// writeJudged judges the log of in (its gold patch, or an empty one) with
// its parser, as msb eval does, and writes what harness.py regrade reads:
// report.json, test_output.txt and the patch.
func writeJudged(t *testing.T, dir, log string, in dataset.Instance, gold bool) {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := spec.Resolve(in, nil)
	if err != nil {
		t.Fatalf("%s: %v", in.InstanceID, err)
	}
	parse, err := grading.Lookup(sp.LogParser)
	if err != nil {
		t.Fatalf("%s: %v", in.InstanceID, err)
	}
	patch := ""
	if gold {
		patch = in.Patch
	}
	v := grading.Judge(grading.Evaluation{InstanceID: in.InstanceID, Repo: in.Repo, Patch: &patch, GradeEmpty: true, Log: string(b), Parse: parse,
		Expected: grading.Expected{FailToPass: in.FailToPass, PassToPass: in.PassToPass}})
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
