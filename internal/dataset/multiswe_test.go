package dataset

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const multiSWEDir = "../../../shared/datasets/multi-swe-bench"

// TestLoadMultiSWE loads every shared Multi-SWE-bench row: 222 rows of 14
// repositories, each with its base commit, patches, test sets and the three
// recorded runs.
func TestLoadMultiSWE(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(multiSWEDir, "*.jsonl"))
	if len(files) == 0 {
		t.Skipf("Multi-SWE-bench rows not present in %s", multiSWEDir)
	}
	repos := map[string]bool{}
	total := 0
	for _, f := range files {
		got, rowErrs, err := Load(f, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range rowErrs {
			t.Errorf("%s: %v", filepath.Base(f), e)
		}
		for _, in := range got {
			total++
			repos[in.Repo] = true
			m := in.MultiSWE
			if in.Source != MultiSWEBench || m == nil || in.InstanceID == "" || len(in.BaseCommit) != 40 || in.Patch == "" || in.TestPatch == "" {
				t.Fatalf("%s: incomplete instance %+v", in.InstanceID, in)
			}
			if m.Run == nil || m.TestPatch == nil || m.FixPatch == nil {
				t.Errorf("%s: a recorded run is missing", in.InstanceID)
			}
			if len(in.FailToPass) != len(m.F2P)+len(m.S2P)+len(m.N2P) || len(in.PassToPass) != len(m.P2P) {
				t.Errorf("%s: FAIL_TO_PASS %d, PASS_TO_PASS %d from f2p %d s2p %d n2p %d p2p %d", in.InstanceID,
					len(in.FailToPass), len(in.PassToPass), len(m.F2P), len(m.S2P), len(m.N2P), len(m.P2P))
			}
		}
	}
	if total != 222 || len(repos) != 14 {
		t.Fatalf("loaded %d rows of %d repositories, want 222 of 14", total, len(repos))
	}
}

// TestMultiSWEBadRows: each malformed row is refused with its row number,
// id and field; the good rows around it load.
func TestMultiSWEBadRows(t *testing.T) {
	good := `{"org":"o","repo":"r","number":1,"base":{"sha":"abc"},"fix_patch":"p","test_patch":"t",` +
		`"p2p_tests":{},"f2p_tests":{"a":{"run":"NONE","test":"FAIL","fix":"PASS"}},"s2p_tests":{},"n2p_tests":{}`
	rows := []struct {
		row   string
		field string
		err   error
	}{
		{good + `}`, "", nil},
		{strings.Replace(good, `"base":{"sha":"abc"}`, `"base":{}`, 1) + `}`, "base.sha", ErrMissingField},
		{strings.Replace(good, `"number":1`, `"number":"1"`, 1) + `}`, "number", ErrWrongType},
		{strings.Replace(good, `"fix":"PASS"`, `"fix":"OK"`, 1) + `}`, "f2p_tests", ErrWrongType},
		{strings.Replace(good, `"p2p_tests":{},`, ``, 1) + `}`, "p2p_tests", ErrMissingField},
		{good + `,"fix_patch_result":{"passed_count":2,"failed_count":0,"skipped_count":0,"passed_tests":["a"],"failed_tests":[],"skipped_tests":[]}}`,
			"fix_patch_result.passed_count", ErrBadResult},
		{good + `,"run_result":{"passed_tests":["a"],"failed_tests":["a"],"skipped_tests":[]}}`,
			"run_result.failed_tests", ErrBadResult},
	}
	var lines []string
	for i, r := range rows {
		lines = append(lines, strings.Replace(r.row, `"number":1`, `"number":`+string(rune('1'+i)), 1))
	}
	path := filepath.Join(t.TempDir(), "rows.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, rowErrs, err := Load(path, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].InstanceID != "o__r-1" || got[0].Repo != "o/r" || got[0].BaseCommit != "abc" {
		t.Fatalf("kept %+v, want the one good row o__r-1", got)
	}
	if len(rowErrs) != len(rows)-1 {
		t.Fatalf("%d row errors, want %d: %v", len(rowErrs), len(rows)-1, rowErrs)
	}
	for i, e := range rowErrs {
		want := rows[i+1]
		if e.Row != i+2 || e.Field != want.field || !errors.Is(e, want.err) || e.InstanceID == "" {
			t.Errorf("row error %d = %v (row %d field %q), want row %d field %q: %v", i, e, e.Row, e.Field, i+2, want.field, want.err)
		}
	}
}

// TestMultiSWEJSONArray: the rows load from a JSON array as from JSON Lines.
func TestMultiSWEJSONArray(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(multiSWEDir, "rust__tokio-rs__bytes.jsonl"))
	if len(files) == 0 {
		t.Skipf("Multi-SWE-bench rows not present in %s", multiSWEDir)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	path := filepath.Join(t.TempDir(), "rows.json")
	if err := os.WriteFile(path, []byte("["+strings.Join(lines, ",\n")+"]"), 0o644); err != nil {
		t.Fatal(err)
	}
	fromArray, rowErrs, err := Load(path, Filter{})
	if err != nil || len(rowErrs) > 0 {
		t.Fatal(err, rowErrs)
	}
	fromLines, _, err := Load(files[0], Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fromArray) != len(lines) || !reflect.DeepEqual(fromArray, fromLines) {
		t.Fatalf("JSON array gave %d rows, JSON Lines %d; equal: %v", len(fromArray), len(fromLines), reflect.DeepEqual(fromArray, fromLines))
	}
}
