package spec

import (
	"errors"
	"testing"

	"github.com/minisandbox/msb/internal/dataset"
)

// TestRepoDir: a spec file's repo_dir reaches the spec of an instance on
// an image; it must be a clean absolute path below /, and an instance msb
// checks out itself (no image) may not have one.
func TestRepoDir(t *testing.T) {
	entry := func(dir string) *Overrides {
		t.Helper()
		ov, err := ParseOverrides([]byte("version: 1\nrepos:\n  me/proj:\n    \"*\":\n      python: \"3.11\"\n      test_cmd: pytest\n      log_parser: pytest\n      directives: none\n      repo_dir: \"" + dir + "\"\n"))
		if err != nil {
			t.Fatal(err)
		}
		return ov
	}
	onImage := dataset.Instance{InstanceID: "proj-1", Repo: "me/proj", Version: "0.1", Source: dataset.Custom, Image: "example.com/proj:1"}
	if s, err := Resolve(onImage, entry("/home/proj")); err != nil || s.RepoDir != "/home/proj" {
		t.Fatalf("repo_dir on an image: %q %v", s.RepoDir, err)
	}
	for _, bad := range []string{"home/proj", "/home/../proj", "/home/proj/", "/"} {
		if _, err := Resolve(onImage, entry(bad)); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("repo_dir %q: %v, want ErrInvalidSpec", bad, err)
		}
	}
	checkedOut := onImage
	checkedOut.Image = ""
	if _, err := Resolve(checkedOut, entry("/home/proj")); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("repo_dir without an image: %v, want ErrInvalidSpec", err)
	}
}
