package dataset

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImageRows: a row's docker_image names its image (R2E-Gym's and
// SWE-rebench's field), and so does image_name in a row with a test_patch
// (SWE-rebench's, not SWE-smith's, which has none); the template names the image of the rows that have
// none, and a row lacking a field the template uses is a bad row naming it.
func TestImageRows(t *testing.T) {
	row := `{"instance_id": "%s", "repo": "o/r", "base_commit": "abc", "patch": "", "test_patch": "", "version": "1.0", "FAIL_TO_PASS": [], "PASS_TO_PASS": []%s}`
	rows := []string{
		strings.Replace(strings.Replace(row, "%s", "Own__Image-1", 1), "%s", `, "docker_image": "swerebench/sweb.eval.x86_64.own_1776_image-1"`, 1),
		strings.Replace(strings.Replace(row, "%s", "Django__Django-11099", 1), "%s", "", 1),
		strings.Replace(strings.Replace(strings.Replace(row, "%s", "a__b-1", 1), "%s", "", 1), `"test_patch": ""`, `"test_patch": "diff", "image_name": "swerebench/sweb.eval.x86_64.a_1776_b-1:latest"`, 1),
	}
	p := writeFile(t, "d.jsonl", strings.Join(rows, "\n")+"\n")
	d, err := Read(p, Options{ImageTemplate: "sweb.eval.x86_64.{instance_id_1776}"})
	if err != nil || len(d.RowErrors) != 0 {
		t.Fatal(err, d.RowErrors)
	}
	want := []string{"swerebench/sweb.eval.x86_64.own_1776_image-1", "sweb.eval.x86_64.django_1776_django-11099", "swerebench/sweb.eval.x86_64.a_1776_b-1:latest"}
	for i, in := range d.Selected {
		if in.Image != want[i] || in.Source != SWEBench {
			t.Errorf("%s: image %q source %s, want %q swe-bench", in.InstanceID, in.Image, in.Source, want[i])
		}
	}
	if d, err = Read(p, Options{}); err != nil || d.Selected[1].Image != "" {
		t.Fatalf("no template: %v %+v", err, d.Selected)
	}
	d, err = Read(p, Options{ImageTemplate: "xingyaoww/sweb.eval.x86_64.{instance_id_s}:{image_name}"})
	if err != nil || len(d.RowErrors) != 1 || d.RowErrors[0].Field != "image" || !errors.Is(d.RowErrors[0].Err, ErrMissingField) ||
		!strings.Contains(d.RowErrors[0].Error(), "{image_name}") {
		t.Fatalf("a field the template uses and the row lacks: %v %v", err, d.RowErrors)
	}
	for _, bad := range []string{"sweb.eval.x86_64.{id}", "fixed:image"} {
		if _, err := Read(p, Options{ImageTemplate: bad}); !errors.Is(err, ErrBadImageTemplate) {
			t.Errorf("template %q: %v", bad, err)
		}
	}
	if got, _ := ImageOf("x/{instance_id_lower}-{instance_id_s}:{repo}@{version}", Instance{InstanceID: "A__B-1", Repo: "o/r", Version: "2"}); got != "x/a__b-1-a_s_b-1:o/r@2" {
		t.Errorf("ImageOf: %q", got)
	}
	for _, c := range []struct{ tmpl, want string }{
		{"{org}/{repo_name}:{number}", "Django/Django:11099"},
		{"{org_lower}_m_{repo_name_lower}:pr-{number}-{version_lower}", "django_m_django:pr-11099-3.0a"},
	} {
		got, err := ImageOf(c.tmpl, Instance{InstanceID: "Django__Django-11099", Repo: "Django/Django", Version: "3.0A"})
		if err != nil || got != c.want {
			t.Errorf("ImageOf(%q) = %q, %v; want %q", c.tmpl, got, err, c.want)
		}
	}
	if _, err := ImageOf("x:{number}", Instance{InstanceID: "no-number-here"}); !errors.Is(err, ErrMissingField) {
		t.Errorf("an id without a number: %v", err)
	}
	if err := CheckImageTemplate("x:{repo_lower_lower}"); !errors.Is(err, ErrBadImageTemplate) {
		t.Errorf("a placeholder lowered twice: %v", err)
	}
}

// TestImageRowsMultiSWE: Multi-SWE-bench rows name their images as the
// harness does, mswebench/<org>_m_<repo>:pr-<number> lowercased, from the
// row's org, repo and number fields.
func TestImageRowsMultiSWE(t *testing.T) {
	p := filepath.Join(multiSWEDir, "java__google__gson.jsonl")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("Multi-SWE-bench rows not present: %v", err)
	}
	d, err := Read(p, Options{ImageTemplate: "mswebench/{org_lower}_m_{repo_name_lower}:pr-{number}"})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.RowErrors) != 0 || len(d.Selected) == 0 {
		t.Fatal(d.RowErrors, len(d.Selected))
	}
	for _, in := range d.Selected {
		want := fmt.Sprintf("mswebench/google_m_gson:pr-%d", in.MultiSWE.Number)
		if in.Image != want {
			t.Errorf("%s: image %q, want %q", in.InstanceID, in.Image, want)
		}
	}
}
