package dataset

import (
	"errors"
	"strings"
	"testing"
)

func TestLoadPredictionsFormats(t *testing.T) {
	for name, body := range map[string]string{
		"list.json":  `[{"instance_id": "a", "model_name_or_path": "m", "model_patch": "diff"}]`,
		"dict.json":  `{"a": {"model_name_or_path": "m", "model_patch": "diff"}}`,
		"rows.jsonl": "{\"instance_id\": \"a\", \"model_name_or_path\": \"m\", \"model_patch\": \"diff\"}\n",
	} {
		got, err := LoadPredictions(writeFile(t, name, body))
		if err != nil || len(got) != 1 || got[0].InstanceID != "a" || got[0].Model != "m" || *got[0].ModelPatch != "diff" {
			t.Errorf("%s: %+v %v", name, got, err)
		}
	}
	got, err := LoadPredictions(writeFile(t, "null.jsonl", `{"instance_id": "a", "model_name_or_path": "m", "model_patch": null}`))
	if err != nil || got[0].ModelPatch != nil {
		t.Errorf("null patch: %+v %v", got, err)
	}
}

// TestLoadPredictionsRefusesBadRows: every bad row is named in one error,
// nothing is graded as an empty patch of model "none" (the harness raises).
func TestLoadPredictionsRefusesBadRows(t *testing.T) {
	rows := strings.Join([]string{
		`{"model_name_or_path": "m", "model_patch": "x"}`,
		`{"instance_id": "b", "model_patch": "x"}`,
		`{"instance_id": "c", "model_name_or_path": "m"}`,
		`{"instance_id": "../../x", "model_name_or_path": "m", "model_patch": "x"}`,
		`{"instance_id": "e", "model_name_or_path": "..", "model_patch": "x"}`,
		`{"instance_id": "f", "model_name_or_path": "m", "model_patch": "x"}`,
		`{"instance_id": "f", "model_name_or_path": "m", "model_patch": "y"}`,
		`{"instance_id": "g", "model_name_or_path": "m", "model_patch": 3}`,
	}, "\n")
	_, err := LoadPredictions(writeFile(t, "bad.jsonl", rows))
	if !errors.Is(err, ErrBadPredictions) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"row 1: no instance_id", "row 2: b: no model_name_or_path", "row 3: c: no model_patch",
		"row 4: invalid name", "row 5: e: invalid name", "row 7: instance f predicted again (first at row 6)", "row 8: g: model_patch"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := LoadPredictions(writeFile(t, "empty.jsonl", "")); !errors.Is(err, ErrBadPredictions) {
		t.Errorf("empty file: %v", err)
	}
}

func TestCheckPredictions(t *testing.T) {
	d := &Dataset{Path: "d.jsonl", All: []Instance{{InstanceID: "a"}, {InstanceID: "b"}}}
	preds, err := LoadPredictions(writeFile(t, "p.jsonl", `{"instance_id": "a", "model_name_or_path": "m", "model_patch": ""}
{"instance_id": "zz", "model_name_or_path": "m", "model_patch": ""}
{"instance_id": "yy", "model_name_or_path": "m", "model_patch": ""}`))
	if err != nil {
		t.Fatal(err)
	}
	err = CheckPredictions(d, preds)
	if !errors.Is(err, ErrUnknownID) || !strings.Contains(err.Error(), "yy, zz") {
		t.Fatalf("err = %v", err)
	}
	if err := CheckPredictions(d, preds[:1]); err != nil {
		t.Fatal(err)
	}
}

// TestReadNamesUnknownIDs: --instances ids that no row has are an error,
// and an instance id that would leave its results directory is a row error.
func TestReadNamesUnknownIDs(t *testing.T) {
	row := func(id string) string {
		return `{"instance_id": "` + id + `", "repo": "o/r", "base_commit": "c", "FAIL_TO_PASS": [], "PASS_TO_PASS": [], "source": "custom"}`
	}
	p := writeFile(t, "d.jsonl", strings.Join([]string{row("a"), row("b"), row("../../../../x"), row(".."), "{not json", row("c")}, "\n"))
	d, err := Read(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.All) != 3 || len(d.Selected) != 3 || len(d.RowErrors) != 3 {
		t.Fatalf("all %d, selected %d, row errors %v", len(d.All), len(d.Selected), d.RowErrors)
	}
	for _, re := range d.RowErrors[:2] {
		if re.Field != "instance_id" {
			t.Errorf("row error %v", re)
		}
	}
	if d.RowErrors[2].Row != 5 {
		t.Errorf("the bad JSON line: %v", d.RowErrors[2])
	}
	if _, err := Read(p, Options{Filter: Filter{IDs: []string{"a", "nope", "gone"}}}); !errors.Is(err, ErrUnknownID) || !strings.Contains(err.Error(), "nope, gone") {
		t.Fatalf("unknown ids: %v", err)
	}
	d, err = Read(p, Options{Filter: Filter{IDs: []string{"b"}}})
	if err != nil || len(d.Selected) != 1 || len(d.All) != 3 {
		t.Fatalf("filtered: %v %+v", err, d)
	}
}
