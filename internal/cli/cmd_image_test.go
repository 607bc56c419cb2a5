package cli

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
)

// busyboxImage writes a docker-archive of a two-layer image made of the
// host's static busybox: the second layer deletes /etc/gone. Its config
// sets PATH, IMG_VAR and the working directory /work; extra is the
// content of its /etc/extra.
func busyboxImage(t *testing.T, tag, extra string) string {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		privtest.Skip(t, "no /bin/busybox (apt-get install busybox-static): %v", err)
	}
	busybox := demotest.File("bin/busybox", string(bb))
	busybox.Mode = 0o755
	base := []demotest.Entry{demotest.Dir("bin/"), busybox, demotest.Dir("etc/"), demotest.File("etc/hello", "hello from the image\n"),
		demotest.File("etc/gone", "x\n")}
	for _, tool := range []string{"sh", "cat", "echo", "pwd", "test", "ls"} {
		base = append(base, demotest.Symlink("bin/"+tool, "busybox"))
	}
	top := []demotest.Entry{demotest.Dir("etc/"), demotest.File("etc/.wh.gone", ""), demotest.Dir("work/"), demotest.File("etc/extra", extra)}
	img, err := mutate.AppendLayers(empty.Image, demotest.EntriesLayer(t, base), demotest.EntriesLayer(t, top))
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
	archive := busyboxImage(t, "example.com/test/busybox:1", "one\n")
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

	// A second image on the same base layer: msb cache images shows the
	// base's bytes as shared by both.
	bb, _ := os.Stat("/bin/busybox")
	shared := func(want int) []engine.ImageInfo {
		t.Helper()
		var imgs []engine.ImageInfo
		r := msb(t, dir, env, "cache", "images", "--json")
		if err := json.Unmarshal([]byte(r.stdout), &imgs); err != nil || len(imgs) != want {
			t.Fatalf("cache images: %v %d %s %s", err, r.code, r.stdout, r.stderr)
		}
		return imgs
	}
	if imgs := shared(1); imgs[0].Layers != 2 || imgs[0].FileBytes < bb.Size() || imgs[0].SharedBytes >= bb.Size() {
		t.Fatalf("one image: %+v", imgs[0])
	}
	if r := msb(t, dir, env, "cache", "import-image", "docker-archive:"+busyboxImage(t, "example.com/test/busybox:2", "two\n")); r.code != 0 {
		t.Fatalf("second import: %d %s", r.code, r.stderr)
	}
	for _, im := range shared(2) {
		if im.SharedBytes < bb.Size() {
			t.Errorf("image %v shares %d bytes, want at least busybox's %d", im.Refs, im.SharedBytes, bb.Size())
		}
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

// TestImportKilled: msb cache import-image killed (SIGKILL) in the middle
// of a layer leaves no image ref and a cache that verifies; gc then frees
// the complete layer it had stored. The image is served by
// go-containerregistry's registry in this process, which sends half of the
// second layer's blob and then stalls, so the kill lands while that layer
// streams.
func TestImportKilled(t *testing.T) {
	big := make([]byte, 4<<20)
	rand.Read(big)
	l1 := tarLayer(t, map[string]string{"etc/first": "first layer\n"})
	l2 := tarLayer(t, map[string]string{"opt/big": string(big)})
	img, err := mutate.AppendLayers(empty.Image, l1, l2)
	if err != nil {
		t.Fatal(err)
	}
	d, err := l2.Digest()
	if err != nil {
		t.Fatal(err)
	}
	stalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/blobs/"+d.String()) {
			reg.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		reg.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		once.Do(func() { close(stalled) })
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/test/big:1"
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	env := []string{"MSB_CACHE=" + filepath.Join(t.TempDir(), "cache")}
	cmd := msbCmd(t, dir, env, "cache", "import-image", "--insecure", "docker://"+ref)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-stalled:
	case err := <-exited:
		t.Fatalf("the import ended before the second layer stalled: %v\n%s", err, stderr.String())
	}
	cmd.Process.Kill()
	<-exited
	if !strings.Contains(stderr.String(), "layer 1/2 ") {
		t.Fatalf("the first layer was not stored before the kill: %s", stderr.String())
	}

	r := msb(t, dir, env, "cache", "ls", "--json")
	if r.code != 0 || strings.Contains(r.stdout, `"image/`) {
		t.Fatalf("cache ls after the kill: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := msb(t, dir, env, "cache", "verify"); r.code != 0 {
		t.Fatalf("cache verify after the kill: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := msb(t, dir, env, "cache", "gc"); r.code != 0 {
		t.Fatalf("cache gc: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := msb(t, dir, env, "cache", "ls", "--json"); r.code != 0 || strings.Contains(r.stdout, `"id"`) {
		t.Fatalf("layers left after gc: %s %s", r.stdout, r.stderr)
	}
}

// tarLayer is a gzip image layer of the files (path -> content).
func tarLayer(t *testing.T, files map[string]string) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, body := range files {
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})
		io.WriteString(tw, body)
	}
	tw.Close()
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}
