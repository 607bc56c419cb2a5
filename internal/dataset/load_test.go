package dataset

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

const realDataset = "../../../shared/datasets/swe-bench-verified.jsonl"

func TestLoadRealDataset(t *testing.T) {
	if _, err := os.Stat(realDataset); err != nil {
		t.Skipf("real dataset not present: %v", err)
	}
	got, rowErrs, err := Load(realDataset, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rowErrs) != 0 {
		t.Fatalf("%d row errors, first: %v", len(rowErrs), rowErrs[0])
	}
	if len(got) != 500 {
		t.Fatalf("loaded %d instances, want 500", len(got))
	}
	repos := map[string]bool{}
	for _, in := range got {
		repos[in.Repo] = true
		if in.Source != SWEBench || in.InstanceID == "" || in.BaseCommit == "" || in.Version == "" || in.TestPatch == "" {
			t.Errorf("%s: incomplete instance: source %q, version %q", in.InstanceID, in.Source, in.Version)
		}
		if len(in.FailToPass) == 0 {
			t.Errorf("%s: no FAIL_TO_PASS tests", in.InstanceID)
		}
	}
	if len(repos) != 12 {
		t.Errorf("%d repositories, want 12", len(repos))
	}
	first := got[0]
	if first.InstanceID != "astropy__astropy-12907" || !reflect.DeepEqual(first.FailToPass[:1],
		[]string{"astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]"}) {
		t.Errorf("first instance = %s %q", first.InstanceID, first.FailToPass)
	}
}

func TestFilters(t *testing.T) {
	if _, err := os.Stat(realDataset); err != nil {
		t.Skipf("real dataset not present: %v", err)
	}
	tests := []struct {
		name string
		f    Filter
		n    int
		ids  []string
	}{
		{"ids", Filter{IDs: []string{"django__django-11099", "sympy__sympy-20590"}}, 2, []string{"django__django-11099", "sympy__sympy-20590"}},
		{"regex", Filter{Regex: `^psf__requests-`}, 8, nil},
		{"slice", Filter{Slice: "0:3"}, 3, []string{"astropy__astropy-12907", "astropy__astropy-13033", "astropy__astropy-13236"}},
		{"negative slice", Filter{Slice: "-2:"}, 2, nil},
		{"regex then slice", Filter{Regex: `^sympy__`, Slice: "1:4"}, 3, nil},
		{"empty slice", Filter{Slice: "5:2"}, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := Load(realDataset, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.n {
				t.Fatalf("%d instances, want %d", len(got), tc.n)
			}
			if tc.ids != nil {
				var ids []string
				for _, in := range got {
					ids = append(ids, in.InstanceID)
				}
				if !reflect.DeepEqual(ids, tc.ids) {
					t.Errorf("ids = %q, want %q", ids, tc.ids)
				}
			}
		})
	}
	for _, f := range []Filter{{Regex: "("}, {Slice: "1"}, {Slice: "a:b"}} {
		if _, _, err := Load(realDataset, f); !errors.Is(err, ErrBadFilter) {
			t.Errorf("filter %+v: err = %v, want ErrBadFilter", f, err)
		}
	}
}

func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBadRows(t *testing.T) {
	const rows = `[
 {"instance_id": "ok-1", "repo": "o/r", "base_commit": "abc", "patch": "p", "test_patch": "t", "version": "1.0",
  "FAIL_TO_PASS": ["a"], "PASS_TO_PASS": "[\"b\"]"},
 {"repo": "o/r"},
 {"instance_id": "bad-type", "repo": 7, "base_commit": "abc", "patch": "p", "test_patch": "t", "version": 1.0,
  "FAIL_TO_PASS": "not json", "PASS_TO_PASS": [1]},
 "a string",
 {"instance_id": "ok-1", "repo": "o/r", "base_commit": "abc", "patch": "p", "test_patch": "t", "version": "1.0",
  "FAIL_TO_PASS": [], "PASS_TO_PASS": []},
 {"instance_id": "ok-2", "repo": "o/r", "base_commit": "abc", "patch": "p", "test_patch": "t", "version": 3.0,
  "FAIL_TO_PASS": "[]", "PASS_TO_PASS": null}
]`
	got, rowErrs, err := Load(writeFile(t, "d.json", rows), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].InstanceID != "ok-1" || !reflect.DeepEqual(got[0].PassToPass, []string{"b"}) {
		t.Errorf("instances = %+v", got)
	}
	want := []struct {
		row          int
		id, field    string
		err          error
		msgFragments string
	}{
		{2, "", "instance_id", ErrMissingField, "row 2: field instance_id: missing"},
		{3, "bad-type", "repo", ErrWrongType, "row 3 (bad-type): field repo: wrong type: want a string, got the number 7"},
		{3, "bad-type", "FAIL_TO_PASS", ErrWrongType, "not a JSON list"},
		{3, "bad-type", "PASS_TO_PASS", ErrWrongType, "item 0 is a number"},
		{4, "", "", nil, "row 4: not a JSON object"},
		{5, "ok-1", "instance_id", ErrDuplicateID, "first at row 1"},
		{6, "ok-2", "PASS_TO_PASS", ErrMissingField, "row 6 (ok-2): field PASS_TO_PASS: missing"},
	}
	var found []string
	for _, e := range rowErrs {
		found = append(found, e.Error())
	}
	for _, w := range want {
		ok := false
		for _, e := range rowErrs {
			if e.Row == w.row && e.InstanceID == w.id && e.Field == w.field && (w.err == nil || errors.Is(e, w.err)) &&
				strings.Contains(e.Error(), w.msgFragments) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("no error like %+v among:\n%s", w, strings.Join(found, "\n"))
		}
	}
	// Row 2's missing fields are all reported, each on its own.
	n := 0
	for _, e := range rowErrs {
		if e.Row == 2 {
			n++
		}
	}
	if n < 5 {
		t.Errorf("row 2 has %d errors, want one per missing field", n)
	}
}

func TestJSONLAndSources(t *testing.T) {
	const rows = `{"instance_id": "oauthlib__oauthlib.1fd52536.combine_file__abc", "repo": "swesmith/oauthlib__oauthlib.1fd52536", "patch": "bug", "FAIL_TO_PASS": ["tests/t.py::a"], "PASS_TO_PASS": [], "image_name": "jyangballin/swesmith.x86_64.oauthlib_1776_oauthlib.1fd52536", "problem_statement": "p"}

{"instance_id": "my-1", "source": "custom", "repo": "me/proj", "base_commit": "c0ffee", "FAIL_TO_PASS": ["test_a.T.test_x"], "PASS_TO_PASS": []}
{"instance_id": "gym-1", "repo": "getmoto/moto", "base_commit": "abc", "patch": "p", "test_patch": "t", "version": "4.1", "FAIL_TO_PASS": [], "PASS_TO_PASS": []}
{"instance_id": "x", "source": "martian", "repo": "r", "base_commit": "c", "FAIL_TO_PASS": [], "PASS_TO_PASS": []}
`
	got, rowErrs, err := Load(writeFile(t, "d.jsonl", rows), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d instances: %+v", len(got), rowErrs)
	}
	sm := got[0]
	if sm.Source != SWESmith || !sm.BugIsGoldPatch() || sm.BaseCommit != "1fd52536" || sm.UpstreamRepo() != "oauthlib/oauthlib" ||
		sm.EnvironmentKey() != sm.ImageName {
		t.Errorf("SWE-smith row = %+v (upstream %s)", sm, sm.UpstreamRepo())
	}
	if got[1].Source != Custom || got[1].BugIsGoldPatch() {
		t.Errorf("custom row = %+v", got[1])
	}
	if got[2].Source != SWEBench || got[2].EnvironmentKey() != "getmoto/moto@4.1" {
		t.Errorf("third row = %+v", got[2])
	}
	if len(rowErrs) != 1 || rowErrs[0].Field != "source" || rowErrs[0].Row != 4 {
		t.Errorf("row errors = %v", rowErrs)
	}
	forced, _, err := LoadFile(writeFile(t, "g.jsonl", rows), Options{Source: SWEGym, Filter: Filter{IDs: []string{"gym-1"}}})
	if err != nil || len(forced) != 1 || forced[0].Source != SWEGym {
		t.Errorf("forced source: %+v, %v", forced, err)
	}
}

func TestFormatDetection(t *testing.T) {
	row := `{"instance_id": "a", "source": "custom", "repo": "r", "base_commit": "c", "FAIL_TO_PASS": [], "PASS_TO_PASS": []}`
	for name, content := range map[string]string{"noext": "\n" + row + "\n", "arr": "[" + row + "]"} {
		got, _, err := Load(writeFile(t, name, content), Filter{})
		if err != nil || len(got) != 1 {
			t.Errorf("%s: %v, %v", name, got, err)
		}
	}
	if _, _, err := Load(writeFile(t, "x.bin", "garbage"), Filter{}); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("garbage: err = %v", err)
	}
	if _, _, err := Load(filepath.Join(t.TempDir(), "missing.jsonl"), Filter{}); err == nil {
		t.Error("missing file: no error")
	}
}

// hubRowLists is a row as dataset hubs write it with list columns.
type hubRowLists struct {
	InstanceID       string   `parquet:"instance_id"`
	Repo             string   `parquet:"repo"`
	BaseCommit       string   `parquet:"base_commit"`
	Patch            string   `parquet:"patch"`
	TestPatch        string   `parquet:"test_patch"`
	ProblemStatement string   `parquet:"problem_statement"`
	Version          string   `parquet:"version"`
	FailToPass       []string `parquet:"FAIL_TO_PASS,list"`
	PassToPass       []string `parquet:"PASS_TO_PASS,list"`
	CreatedAt        string   `parquet:"created_at"`
}

// hubRowStrings is a row as SWE-bench publishes it: the lists as JSON strings.
type hubRowStrings struct {
	InstanceID string  `parquet:"instance_id"`
	Repo       string  `parquet:"repo"`
	BaseCommit string  `parquet:"base_commit"`
	Patch      string  `parquet:"patch"`
	TestPatch  string  `parquet:"test_patch"`
	Version    *string `parquet:"version,optional"`
	FailToPass string  `parquet:"FAIL_TO_PASS"`
	PassToPass string  `parquet:"PASS_TO_PASS"`
}

func writeParquet[T any](t testing.TB, rows []T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "d.parquet")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[T](f)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParquetLists(t *testing.T) {
	p := writeParquet(t, []hubRowLists{
		{InstanceID: "a__b-1", Repo: "a/b", BaseCommit: "c1", Patch: "p", TestPatch: "t", Version: "1.0",
			FailToPass: []string{"t1", "t2"}, PassToPass: nil, CreatedAt: "2023-01-01T00:00:00Z"},
		{InstanceID: "a__b-2", Repo: "a/b", BaseCommit: "c2", Patch: "p", TestPatch: "t", Version: "1.1",
			FailToPass: []string{"t3"}, PassToPass: []string{"t4"}},
	})
	got, rowErrs, err := Load(p, Filter{})
	if err != nil || len(rowErrs) != 0 {
		t.Fatalf("err %v, row errors %v", err, rowErrs)
	}
	if len(got) != 2 || !reflect.DeepEqual(got[0].FailToPass, []string{"t1", "t2"}) || len(got[0].PassToPass) != 0 ||
		got[0].CreatedAt != "2023-01-01T00:00:00Z" || !reflect.DeepEqual(got[1].PassToPass, []string{"t4"}) || got[1].Version != "1.1" {
		t.Errorf("instances = %+v", got)
	}
}

func TestParquetStringsAndBadRows(t *testing.T) {
	v := "2.0"
	p := writeParquet(t, []hubRowStrings{
		{InstanceID: "x-1", Repo: "o/r", BaseCommit: "c", Patch: "p", TestPatch: "t", Version: &v, FailToPass: `["a"]`, PassToPass: `[]`},
		{InstanceID: "x-2", Repo: "o/r", BaseCommit: "c", Patch: "p", TestPatch: "t", Version: nil, FailToPass: `["a"`, PassToPass: `[]`},
	})
	got, rowErrs, err := Load(p, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].InstanceID != "x-1" || !reflect.DeepEqual(got[0].FailToPass, []string{"a"}) {
		t.Errorf("instances = %+v", got)
	}
	fields := map[string]bool{}
	for _, e := range rowErrs {
		if e.Row != 2 || e.InstanceID != "x-2" {
			t.Errorf("unexpected error %v", e)
		}
		fields[e.Field] = true
	}
	if !fields["version"] || !fields["FAIL_TO_PASS"] {
		t.Errorf("row errors = %v", rowErrs)
	}
}

func TestCorruptParquet(t *testing.T) {
	if _, _, err := Load(writeFile(t, "bad.parquet", "PAR1 not really"), Filter{}); err == nil {
		t.Error("corrupt parquet: no error")
	}
}
