package multiswe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/privtest"
)

const rowsDir = "../../../../shared/datasets/multi-swe-bench"

// oracle asks testdata/oracle.py (the multi-swe-bench package in
// MSB_TEST_MULTISWE, run by MSB_TEST_PYTHON) the question in, and decodes
// its answer into out.
func oracle(t *testing.T, in, out any) {
	t.Helper()
	if os.Getenv("MSB_TEST_MULTISWE") == "" {
		privtest.Skip(t, "MSB_TEST_MULTISWE is not set: make test sets it (make test-venv installs testdata/requirements.txt)")
	}
	py := privtest.Python(t, "testdata/oracle.py")
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join("testdata", "oracle.py"))
	cmd.Stdin = bytes.NewReader(b)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	res, err := cmd.Output()
	if err != nil {
		t.Fatalf("oracle.py (%s): %v\n%s", py, err, stderr.Bytes())
	}
	if err := json.Unmarshal(res, out); err != nil {
		t.Fatalf("oracle.py answered: %v", err)
	}
}

var (
	rowsOnce sync.Once
	rowsErr  error
	rowsAll  []dataset.Instance
)

// loadRows reads every shared Multi-SWE-bench row (once per test binary).
func loadRows(t *testing.T) []dataset.Instance {
	t.Helper()
	rowsOnce.Do(func() { rowsAll, rowsErr = readRows() })
	if errors.Is(rowsErr, os.ErrNotExist) {
		t.Skipf("Multi-SWE-bench rows not present in %s", rowsDir)
	}
	if rowsErr != nil {
		t.Fatal(rowsErr)
	}
	return rowsAll
}

func readRows() ([]dataset.Instance, error) {
	files, _ := filepath.Glob(filepath.Join(rowsDir, "*.jsonl"))
	if len(files) == 0 {
		return nil, os.ErrNotExist
	}
	var rows []dataset.Instance
	for _, f := range files {
		got, rowErrs, err := dataset.Load(f, dataset.Filter{})
		if err == nil && len(rowErrs) > 0 {
			err = rowErrs[0]
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		rows = append(rows, got...)
	}
	return rows, nil
}

type oracleReport struct {
	Valid bool     `json:"valid"`
	P2P   []string `json:"p2p"`
	F2P   []string `json:"f2p"`
	S2P   []string `json:"s2p"`
	N2P   []string `json:"n2p"`
}

type reportCase struct {
	Run  *dataset.RunResult `json:"run"`
	Test *dataset.RunResult `json:"test"`
	Fix  *dataset.RunResult `json:"fix"`
}

// emptyRun is a run with no test results.
var emptyRun = &dataset.RunResult{Passed: []string{}, Failed: []string{}, Skipped: []string{}}

// TestReportMatchesHarness puts every shared row's recorded runs to
// NewReport and to the package's report.py: validity and the four sets
// must be equal. Besides the recorded fix run, each row is also graded
// with its test-patch run and its base run standing for the fix run (an
// agent that fixed nothing), and with an empty fix run, so that invalid
// reports of every kind are compared too. Resolution is then checked the
// way gen_report.py's evaluation mode decides it from the report.
func TestReportMatchesHarness(t *testing.T) {
	rows := loadRows(t)
	var cases []reportCase
	for _, in := range rows {
		m := in.MultiSWE
		for _, fix := range []*dataset.RunResult{m.FixPatch, m.TestPatch, m.Run, emptyRun} {
			cases = append(cases, reportCase{Run: m.Run, Test: m.TestPatch, Fix: fix})
		}
	}
	var want []oracleReport
	oracle(t, map[string]any{"reports": cases}, &want)
	if len(want) != len(cases) {
		t.Fatalf("oracle answered %d reports for %d cases", len(want), len(cases))
	}
	valid, resolved := 0, 0
	for i, c := range cases {
		row := rows[i/4]
		got := NewReport(ResultOf(c.Run), ResultOf(c.Test), ResultOf(c.Fix))
		g := oracleReport{Valid: got.Valid, P2P: sortedKeys(got.P2P), F2P: sortedKeys(got.F2P), S2P: sortedKeys(got.S2P), N2P: sortedKeys(got.N2P)}
		if !reflect.DeepEqual(g, want[i]) {
			t.Errorf("%s variant %d: msb %+v (%v), harness %+v", row.InstanceID, i%4, g, got.Invalid, want[i])
			continue
		}
		if got.Valid == (got.Invalid != nil) {
			t.Errorf("%s variant %d: valid %v with reason %v", row.InstanceID, i%4, got.Valid, got.Invalid)
		}
		harnessResolved := want[i].Valid &&
			contains(want[i].P2P, row.MultiSWE.P2P) && contains(want[i].F2P, row.MultiSWE.F2P) &&
			contains(want[i].S2P, row.MultiSWE.S2P) && contains(want[i].N2P, row.MultiSWE.N2P)
		v := Evaluate(row.MultiSWE, ResultOf(c.Fix))
		if v.Resolved != harnessResolved {
			t.Errorf("%s variant %d: msb resolved %v (missing %v), harness %v", row.InstanceID, i%4, v.Resolved, v.Missing, harnessResolved)
		}
		if i%4 == 0 {
			if got.Valid {
				valid++
			}
			if v.Resolved {
				resolved++
			}
		}
	}
	t.Logf("%d rows, %d cases: recorded fix runs valid %d, resolved %d", len(rows), len(cases), valid, resolved)
}

// contains reports whether every name of want is in got.
func contains(got []string, want map[string]dataset.Transition) bool {
	have := newSet(got...)
	for n := range want {
		if !have.has(n) {
			return false
		}
	}
	return true
}
