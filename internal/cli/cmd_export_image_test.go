package cli

import (
	"archive/tar"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/rootfs"
)

// TestExportImage: msb cache export-image writes an imported image as an
// oci-archive (named by its reference unless the destination names it)
// that msb cache import-image reads back into another cache as the same
// store layers with the same config; a bad destination or name exits 2
// with one line and leaves no file.
func TestExportImage(t *testing.T) {
	archive := busyboxImage(t, "example.com/test/busybox:1", "one\n")
	env := []string{"MSB_CACHE=" + filepath.Join(t.TempDir(), "cache")}
	env2 := []string{"MSB_CACHE=" + filepath.Join(t.TempDir(), "cache2")}
	dir, out := t.TempDir(), t.TempDir()
	imported := func(env []string, source string) engine.ImageImport {
		t.Helper()
		r := msb(t, dir, env, "--json", "cache", "import-image", source)
		var imp engine.ImageImport
		if err := json.Unmarshal([]byte(r.stdout), &imp); r.code != 0 || err != nil {
			t.Fatalf("import-image %s: %d %v\n%s\n%s", source, r.code, err, r.stdout, r.stderr)
		}
		return imp
	}
	first := imported(env, "docker-archive:"+archive)

	for dest, wantRef := range map[string]string{
		"oci-archive:" + filepath.Join(out, "img.tar"):                     "example.com/test/busybox:1",
		"docker-archive:" + filepath.Join(out, "d.tar") + ":localhost/x:2": "localhost/x:2",
	} {
		r := msb(t, dir, env, "--json", "cache", "export-image", "example.com/test/busybox:1", dest)
		var ex rootfs.Exported
		if err := json.Unmarshal([]byte(r.stdout), &ex); r.code != 0 || err != nil {
			t.Fatalf("export-image %s: %d %v\n%s\n%s", dest, r.code, err, r.stdout, r.stderr)
		}
		if ex.Layers != 2 || ex.Reference != wantRef {
			t.Errorf("%s: exported %+v", dest, ex)
		}
		again := imported(env2, dest)
		if !slices.Equal(again.Layers, first.Layers) || !slices.Equal(again.Config.Env, first.Config.Env) || again.Config.WorkingDir != "/work" {
			t.Errorf("%s: reimported %+v, want the layers and config of %+v", dest, again, first)
		}
	}

	for _, args := range [][]string{
		{"cache", "export-image", "example.com/test/nosuch:1", "oci-archive:" + filepath.Join(out, "bad1.tar")},
		{"cache", "export-image", "example.com/test/busybox:1", "docker://127.0.0.1:1/x:1"},
		{"cache", "export-image", "example.com/test/busybox:1", "oci-archive:" + filepath.Join(out, "bad2.tar") + ":Bad Ref"},
	} {
		r := msb(t, dir, env, args...)
		if r.code != exitUsage || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.HasPrefix(r.stderr, "msb: ") {
			t.Errorf("msb %s: exit %d, stderr %q; want exit 2 and one line", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(out, "bad*")); len(m) != 0 {
		t.Errorf("left behind: %v", m)
	}
}

// TestExportImageInstance: with --dataset, NAME is an instance id and the
// image is its task's layers (the repository at /testbed among them) with
// the task's working directory; on the host base msb says the host's root
// is left out.
func TestExportImageInstance(t *testing.T) {
	gen, env := demoFixture(t)
	dir := t.TempDir()
	ds := []string{"--dataset", gen.DatasetPath, "--spec", gen.SpecPath}
	if r := msb(t, dir, env, append([]string{"cache", "build", "--instances", "demo__calc-1"}, ds...)...); r.code != 0 {
		t.Fatalf("cache build: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	layout := filepath.Join(t.TempDir(), "layout")
	r := msb(t, dir, env, append([]string{"cache", "export-image", "demo__calc-1", "oci:" + layout}, ds...)...)
	if r.code != 0 || !strings.Contains(r.stderr, "host's root") {
		t.Fatalf("export-image: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	o, err := rootfs.Open(context.Background(), "oci:"+layout+":localhost/msb-export/demo__calc-1:latest", rootfs.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	cf, err := o.Image.ConfigFile()
	if err != nil || cf.Config.WorkingDir != "/testbed" {
		t.Fatalf("config %+v, %v", cf, err)
	}
	layers, err := o.Image.Layers()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for h, err := tr.Next(); err == nil; h, err = tr.Next() {
			found = found || h.Name == "testbed/calc/stats.py"
		}
		rc.Close()
	}
	if !found {
		t.Errorf("no layer of %d holds testbed/calc/stats.py", len(layers))
	}

	shimmed := filepath.Join(t.TempDir(), "shim")
	if r := msb(t, dir, env, append([]string{"cache", "export-image", "--conda-shim", "demo__calc-1", "oci:" + shimmed + ":localhost/shim:1"}, ds...)...); r.code != 0 {
		t.Fatalf("export-image --conda-shim: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	checkCondaShim(t, "oci:"+shimmed+":localhost/shim:1", len(layers)+1)
	if r := msb(t, dir, env, "cache", "export-image", "--conda-shim", "demo__calc-1", "oci:"+shimmed); r.code != exitUsage || !strings.Contains(r.stderr, "--conda-shim needs --dataset") {
		t.Errorf("--conda-shim without --dataset: exit %d, %q", r.code, r.stderr)
	}
}

// checkCondaShim reads the top layer of the image at src, which must have
// n layers: /opt/miniconda3/envs/testbed links to the venv, and the
// activate script, sourced by bash under set -u as the SWE-bench
// harness's eval scripts do, makes conda activate testbed put the venv
// first on PATH and refuses any other env; sourced with the caller's own
// arguments (bash's way when it is given none) it activates nothing, with
// testbed it activates testbed.
func checkCondaShim(t *testing.T, src string, n int) {
	t.Helper()
	o, err := rootfs.Open(context.Background(), src, rootfs.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	layers, err := o.Image.Layers()
	if err != nil || len(layers) != n {
		t.Fatalf("%d layers (%v), want %d", len(layers), err, n)
	}
	rc, err := layers[n-1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	activate := filepath.Join(t.TempDir(), "activate")
	link := ""
	tr := tar.NewReader(rc)
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		switch h.Name {
		case "opt/miniconda3/envs/testbed":
			link = h.Linkname
		case "opt/miniconda3/bin/activate":
			b, _ := io.ReadAll(tr)
			if err := os.WriteFile(activate, b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if link != envcache.VenvPath {
		t.Errorf("envs/testbed links to %q, want %s", link, envcache.VenvPath)
	}
	script := `set -euo pipefail; PATH=/usr/bin:/bin; source "$1"; echo "${VIRTUAL_ENV:-none}"
conda activate testbed; conda activate testbed
echo "$PATH|$VIRTUAL_ENV|$CONDA_DEFAULT_ENV"; if conda activate other 2>/dev/null; then echo other; fi
conda deactivate; echo "$PATH|${VIRTUAL_ENV:-}"; source "$1" testbed; echo "$PATH"`
	out, err := exec.Command("bash", "-c", script, "bash", activate).CombinedOutput()
	venvPath := envcache.VenvPath + "/bin:/usr/bin:/bin"
	want := "none\n" + venvPath + "|" + envcache.VenvPath + "|testbed\n/usr/bin:/bin|\n" + venvPath + "\n"
	if err != nil || string(out) != want {
		t.Errorf("sourcing the shim: %v\n%s\nwant\n%s", err, out, want)
	}
}
