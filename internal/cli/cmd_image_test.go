package cli

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/minisandbox/msb/internal/privtest"
)

// busyboxImage writes a docker-archive of a two-layer image made of the
// host's static busybox: the second layer deletes /etc/gone. Its config
// sets PATH, IMG_VAR and the working directory /work.
func busyboxImage(t *testing.T, tag string) string {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		privtest.Skip(t, "no /bin/busybox (apt-get install busybox-static): %v", err)
	}
	type ent struct {
		name, body, link string
		typ              byte
		mode             int64
	}
	layer := func(ents []ent) v1.Layer {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, e := range ents {
			h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Size: int64(len(e.body))}
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			io.WriteString(tw, e.body)
		}
		tw.Close()
		b := buf.Bytes()
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	base := []ent{{name: "bin/", typ: tar.TypeDir, mode: 0o755}, {name: "bin/busybox", body: string(bb), typ: tar.TypeReg, mode: 0o755},
		{name: "etc/", typ: tar.TypeDir, mode: 0o755}, {name: "etc/hello", body: "hello from the image\n", typ: tar.TypeReg, mode: 0o644},
		{name: "etc/gone", body: "x\n", typ: tar.TypeReg, mode: 0o644}}
	for _, tool := range []string{"sh", "cat", "echo", "pwd", "test", "ls"} {
		base = append(base, ent{name: "bin/" + tool, link: "busybox", typ: tar.TypeSymlink, mode: 0o777})
	}
	top := []ent{{name: "etc/", typ: tar.TypeDir, mode: 0o755}, {name: "etc/.wh.gone", typ: tar.TypeReg, mode: 0o644},
		{name: "work/", typ: tar.TypeDir, mode: 0o755}}
	img, err := mutate.AppendLayers(empty.Image, layer(base), layer(top))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config = v1.Config{Env: []string{"PATH=/bin", "IMG_VAR=from-image"}, WorkingDir: "/work"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	tg, err := name.NewTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "image.tar")
	if err := tarball.WriteToFile(f, tg, img); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRunOnImage: msb cache import-image stores a docker-archive, and
// msb run --image runs a command on the image's root alone (no host
// base) with its Env and WorkingDir, the whiteout honoured by the overlay;
// bad input exits 2 with one line and leaves a cache that verifies.
func TestRunOnImage(t *testing.T) {
	archive := busyboxImage(t, "example.com/test/busybox:1")
	env := []string{"MSB_CACHE=" + filepath.Join(t.TempDir(), "cache")}
	dir := t.TempDir()

	r := msb(t, dir, env, "cache", "import-image", "docker-archive:"+archive)
	if r.code != 0 || !strings.Contains(r.stdout, "ref image/example.com/test/busybox:1") {
		t.Fatalf("import-image: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	script := `cat /etc/hello; echo "var=$IMG_VAR cli=$CLI_VAR"; pwd; test -e /etc/gone && echo gone-visible; test -e /usr/bin/apt-get && echo host-visible; echo done`
	r = msb(t, dir, env, "run", "--image", "example.com/test/busybox:1", "-e", "CLI_VAR=given", "--", "sh", "-c", script)
	want := "hello from the image\nvar=from-image cli=given\n/work\ndone\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("run --image: %d\nstdout %q, want %q\nstderr %s", r.code, r.stdout, want, r.stderr)
	}

	for _, args := range [][]string{
		{"cache", "import-image", "docker-archive:" + filepath.Join(dir, "nonexistent.tar")},
		{"cache", "import-image", "--insecure", "docker://127.0.0.1:1/x/y:z"},
		{"run", "--image", "example.com/test/nosuch:1", "--", "true"},
	} {
		r := msb(t, dir, env, args...)
		if r.code != exitUsage || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.HasPrefix(r.stderr, "msb: ") {
			t.Errorf("msb %s: exit %d, stderr %q; want exit 2 and one line", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	if r := msb(t, dir, env, "cache", "verify"); r.code != 0 {
		t.Fatalf("cache verify: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestRunOnImageRootless is TestRunOnImage as an unprivileged user: a
// rootless store and sandbox.
func TestRunOnImageRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestRunOnImage$")
}
