package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/privtest"
)

// TestImageRows validates a dataset whose rows name images: one row's
// docker_image was imported with msb cache import-image (a docker-archive
// made here) and validates (gold resolved, empty not) on it; the other
// row's image, named by --image-template, is not in the cache: its error
// names the image and the import command, and the first row still ran.
// msb cache build reports the imported one reused and the other failed.
func TestImageRows(t *testing.T) {
	gen, _ := demoFixture(t)
	dir := t.TempDir()
	env := []string{"MSB_CACHE=" + filepath.Join(dir, "cache")}
	src := gen.Instances[0]
	const ref = "example.com/msb-test/calc:1"
	img := demotest.Image(t, demotest.ImageRootfs(t, gen.RepoDir, src.BaseCommit, gen.PyVersion))
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "calc.tar")
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		t.Fatal(err)
	}
	if r := msb(t, dir, env, "cache", "import-image", "--name", ref, "docker-archive:"+archive); r.code != 0 {
		t.Fatalf("import-image: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var rows []byte
	for i, image := range []string{ref, ""} {
		in := src
		in.InstanceID, in.Repo, in.Image, in.RepoURL = []string{"calc__img-1", "calc__img-2"}[i], "demo/calc-img", image, ""
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(append(rows, b...), '\n')
	}
	data, specPath := filepath.Join(dir, "rows.jsonl"), filepath.Join(dir, "spec.yaml")
	os.WriteFile(data, rows, 0o644)
	os.WriteFile(specPath, []byte("version: 1\nrepos:\n  demo/calc-img:\n    \"*\":\n      test_cmd: python -m unittest -v\n      log_parser: unittest\n      directives: none\n"), 0o644)
	out := filepath.Join(dir, "out")
	r := msb(t, dir, env, "validate", "--dataset", data, "--spec", specPath, "--out", out, "--image-template", "example.com/msb-test/{instance_id_lower}:1")
	valid, _ := os.ReadFile(filepath.Join(out, "validate", "valid.json"))
	if !strings.Contains(string(valid), `"calc__img-1"`) || strings.Contains(string(valid), "calc__img-2") {
		t.Fatalf("valid.json %s: exit %d\n%s%s", valid, r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "calc__img-2") || !strings.Contains(r.stdout, "msb cache import-image --name example.com/msb-test/calc__img-2:1") {
		t.Fatalf("the row whose image is not imported: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = msb(t, dir, env, "cache", "build", "--dataset", data, "--spec", specPath, "--image-template", "example.com/msb-test/{instance_id_lower}:1")
	if r.code != exitFailure || !regexp.MustCompile(`calc__img-1 +reused`).MatchString(r.stdout) ||
		!strings.Contains(r.stdout, "msb cache import-image --name example.com/msb-test/calc__img-2:1") {
		t.Fatalf("cache build of image rows (one imported, one not): exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := msb(t, dir, env, "validate", "--dataset", data, "--spec", specPath, "--out", out, "--image-template", "x/{id}"); r.code != exitUsage ||
		!strings.Contains(r.stderr, "unknown placeholder {id}") {
		t.Fatalf("a bad template: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestRootlessImageRows reruns TestImageRows as an unprivileged user.
func TestRootlessImageRows(t *testing.T) {
	privtest.Unprivileged(t, "^TestImageRows$")
}
