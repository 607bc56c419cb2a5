package envcache

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/spec"
)

// TestImageBase builds an environment on an imported two-layer image
// (--base image/<ref>): the interpreter is found in the lower layer, the
// task runs on the image's layers with no host dirs, and the image's record
// is not part of the root.
func TestImageBase(t *testing.T) {
	tree := makeRootfs(t)
	img, err := mutate.AppendLayers(empty.Image, demotest.DirLayer(t, tree, nil), bytesLayer(t, "etc/marker", "from the image's top layer\n"))
	if err != nil {
		t.Fatal(err)
	}
	repo := makeRepo(t, 4, 64, 1)
	dir := filepath.Join(t.TempDir(), "cache")
	c := openCache(t, Options{Dir: dir, Runtime: testRuntime(t)})
	imp, err := rootfs.Import(t.Context(), c.store, img, rootfs.ImportOptions{Names: []string{"example.com/test/py:1"}})
	if err != nil {
		t.Fatal(err)
	}
	c = openCache(t, Options{Dir: dir, Runtime: c.opts.Runtime, Base: "image/example.com/test/py:1"})
	sp := spec.Spec{Repo: "demo/proj", Version: "1.0", Python: "3.11", Install: "python -c 'import json' && echo ok > " + VenvPath + "/built-on-image"}
	p := prepare(t, c, repo.instance(0), sp)
	joined := strings.Join(p.Layers, ":")
	if p.HostBase || !strings.Contains(joined, imp.Record.Layers[0].Hex()) || !strings.Contains(joined, imp.Record.Layers[1].Hex()) ||
		strings.Contains(joined, imp.RecordLayer.Hex()) {
		t.Fatalf("task layers %v: want the image's two layers and not its record (host base %v)", p.Layers, p.HostBase)
	}
	sb := sandboxOf(t, c.opts.Runtime, p)
	out := sh(t, sb, "read -r x < "+VenvPath+"/built-on-image; echo $x; read -r m < /etc/marker; echo $m; test -e /image.json && echo record-leak; test -e /usr/bin/git && echo host-leak; cd /testbed && python hello.py")
	if out != "ok\nfrom the image's top layer\nhello" && out != "ok\nfrom the image's top layer\nhello\n" {
		t.Fatalf("got %q", out)
	}
}

// TestImageBaseEnv: an environment built on an image runs its build steps
// and its tasks with the image's Env under its own: the image's PATH
// where a sandbox's default PATH would be (its tool found after the
// venv), its other variables as they are; and an image whose Env differs
// is another environment key, while one whose Env is the default PATH
// alone (a Debian base's) keeps the key of no Env.
func TestImageBaseEnv(t *testing.T) {
	tree := makeRootfs(t)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tool := "#!/usr/bin/bash\necho \"tool $1 $IMG_VAR\"\n"
	tw.WriteHeader(&tar.Header{Name: "opt/imgtool/bin/imgtool", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(tool))})
	io.WriteString(tw, tool)
	tw.Close()
	layers := []v1.Layer{demotest.DirLayer(t, tree, nil), demotest.BytesLayer(t, buf.Bytes())}
	dir := filepath.Join(t.TempDir(), "cache")
	c := openCache(t, Options{Dir: dir, Runtime: testRuntime(t)})
	imagePath := "PATH=/opt/imgtool/bin:" + systemPath
	for name, env := range map[string][]string{"env:1": {imagePath, "IMG_VAR=from-image"}, "plain:1": nil, "debian:1": {"PATH=" + systemPath}} {
		img, err := mutate.AppendLayers(empty.Image, layers...)
		if err == nil {
			img, err = mutate.Config(img, v1.Config{Env: env})
		}
		if err == nil {
			_, err = rootfs.Import(t.Context(), c.store, img, rootfs.ImportOptions{Names: []string{"example.com/test/" + name}})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	repo := makeRepo(t, 4, 64, 1)
	sp := spec.Spec{Repo: "demo/proj", Version: "1.0", Python: "3.11", Install: "imgtool install > " + VenvPath + "/tool-out"}
	keys := map[string]string{}
	for _, name := range []string{"env:1", "plain:1", "debian:1"} {
		c := openCache(t, Options{Dir: dir, Runtime: c.opts.Runtime, Base: "image/example.com/test/" + name})
		if name != "env:1" {
			res, _, err := c.envJob(t.Context(), &run{timings: map[string]time.Duration{}}, repo.instance(0), sp, mustBase(t, c))
			if err != nil {
				t.Fatal(err)
			}
			keys[name] = res.key
			continue
		}
		p := prepare(t, c, repo.instance(0), sp)
		keys[name] = p.EnvKey
		sb := sandboxOf(t, c.opts.Runtime, p)
		out := sh(t, sb, "read -r x < "+VenvPath+"/tool-out; echo $x; imgtool task; echo $PATH") // the image has no cat
		want := "tool install from-image\ntool task from-image\n" + VenvPath + "/bin:/opt/imgtool/bin:" + systemPath
		if out != want {
			t.Fatalf("on an image with Env: got %q, want %q", out, want)
		}
	}
	if keys["env:1"] == keys["plain:1"] || keys["debian:1"] != keys["plain:1"] {
		t.Fatalf("environment keys %v: want the image with Env apart, the default PATH's equal to none's", keys)
	}
}

// mustBase is the cache's base, released at the test's end.
func mustBase(t *testing.T, c *Cache) baseInfo {
	t.Helper()
	b, err := c.base(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.release)
	return b
}

// bytesLayer is an image layer holding one file.
func bytesLayer(t *testing.T, name, body string) v1.Layer {
	t.Helper()
	return filesLayer(t, map[string]string{name: body})
}

// filesLayer is an image layer holding files (name: body), in name order.
func filesLayer(t *testing.T, files map[string]string) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		body := files[name]
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})
		io.WriteString(tw, body)
	}
	tw.Close()
	return demotest.BytesLayer(t, buf.Bytes())
}

// TestImageRepoDirs checks where an image instance's repository is taken
// from: the spec's repo_dir alone when it has one, else a Multi-SWE-bench
// row's /home/<repo>, else the image's WORKDIR
// when it holds a .git directory, else /testbed, as the overlay of the
// image's layers shows them (a whiteout in an upper layer removes a
// lower layer's repository); and that the image's USER is looked up in
// its /etc/passwd and applied in root mode only (a rootless sandbox maps
// only root).
func TestImageRepoDirs(t *testing.T) {
	base := map[string]string{
		"home/calc/.git/HEAD": "ref: refs/heads/main\n", "testbed/.git/HEAD": "ref: refs/heads/main\n",
		"srv/app/.git/HEAD": "ref: refs/heads/main\n", "work/README": "not a repository\n",
		"etc/passwd": "root:x:0:0::/root:/bin/sh\ncalc:x:1000:1001::/home/calc:/bin/sh\n",
	}
	c := openCache(t, Options{Runtime: testRuntime(t)})
	importAs := func(name, workdir, user string, layers ...v1.Layer) {
		img, err := mutate.AppendLayers(empty.Image, layers...)
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.Config(img, v1.Config{WorkingDir: workdir, User: user}); err != nil {
			t.Fatal(err)
		}
		if _, err := rootfs.Import(t.Context(), c.store, img, rootfs.ImportOptions{Names: []string{name}}); err != nil {
			t.Fatal(err)
		}
	}
	importAs("example.com/t/work:1", "/work", "calc", filesLayer(t, base))
	importAs("example.com/t/srv:1", "/srv/app/", "", filesLayer(t, base))
	importAs("example.com/t/gone:1", "/srv/none", "", filesLayer(t, base), filesLayer(t, map[string]string{"home/.wh.calc": "", "testbed/.wh..wh..opq": ""}))
	importAs("example.com/t/nouser:1", "/", "nobody", filesLayer(t, base))
	mswe := &dataset.MultiSWE{Org: "org", Name: "calc"}
	wantUser := sandbox.User{UID: 1000, GID: 1001}
	for _, tc := range []struct {
		image, repoDir string // repoDir: the spec's
		mswe           *dataset.MultiSWE
		workdir        string
		user           sandbox.User
	}{
		{"example.com/t/work:1", "", nil, Testbed, wantUser},             // WORKDIR /work holds no repository
		{"example.com/t/work:1", "", mswe, "/home/calc", wantUser},       // Multi-SWE-bench's place first
		{"example.com/t/work:1", "/srv/app", mswe, "/srv/app", wantUser}, // the spec's over all
		{"example.com/t/srv:1", "", nil, "/srv/app", sandbox.User{}},
		{"example.com/t/srv:1", "", mswe, "/home/calc", sandbox.User{}},
		{"example.com/t/srv:1", "/work", nil, "", sandbox.User{}}, // the spec's has none: not looked further
		{"example.com/t/gone:1", "", mswe, "", sandbox.User{}},    // /home/calc deleted, /testbed emptied
	} {
		inst := dataset.Instance{InstanceID: "org__calc-1", Image: tc.image, MultiSWE: tc.mswe}
		p, err := c.Prepare(t.Context(), inst, spec.Spec{RepoDir: tc.repoDir}, nil)
		if tc.workdir == "" {
			looked := "/home/calc, /srv/none, /testbed"
			if tc.repoDir != "" {
				looked = tc.repoDir
			}
			if !errors.Is(err, ErrImageNoRepo) || !strings.Contains(err.Error(), "(looked in "+looked+")") {
				t.Errorf("%s (multi-swe %v): %v, want ErrImageNoRepo naming where it looked", tc.image, tc.mswe != nil, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.image, err)
		}
		p.Release()
		if p.Workdir != tc.workdir || p.User != tc.user {
			t.Errorf("%s (multi-swe %v): repository %s as %+v, want %s as %+v", tc.image, tc.mswe != nil, p.Workdir, p.User, tc.workdir, tc.user)
		}
	}
	_, err := c.Prepare(t.Context(), dataset.Instance{InstanceID: "x-1", Image: "example.com/t/nouser:1"}, spec.Spec{}, nil)
	if !errors.Is(err, rootfs.ErrNoUser) {
		t.Errorf("an image whose USER its /etc/passwd lacks: %v", err)
	}
}

// TestImageRepoDirsRootless reruns TestImageRepoDirs as an unprivileged
// user.
func TestImageRepoDirsRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestImageRepoDirs$")
}
