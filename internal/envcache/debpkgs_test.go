package envcache

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/spec"
)

// TestDebianBasePackages: a spec that names a Debian base built by
// mmdebstrap (minbase with python3) gets its system_packages (hello)
// installed by apt-get in a layer over the base, and its environment built
// on that layer; a second Prepare builds nothing, and a spec naming a base
// the cache lacks fails with ErrBadBase. Skips (fails when strict) without
// mmdebstrap or deb.debian.org.
func TestDebianBasePackages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	c := openCache(t, Options{Dir: dir, Runtime: testRuntime(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	b, err := rootfs.BuildDebian(ctx, c.store, rootfs.DebianSpec{Suite: "bookworm", Packages: []string{"python3", "python3-venv"}},
		rootfs.DebianBuildOptions{Name: "py", TempDir: dir})
	if errors.Is(err, rootfs.ErrDebianMirror) || errors.Is(err, rootfs.ErrNoMmdebstrap) {
		privtest.Skip(t, "building a Debian base: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	repo := makeRepo(t, 4, 64, 1)
	sp := spec.Spec{Repo: "demo/proj", Version: "1.0", Python: "3.11", Base: "debian/py", SystemPackages: []string{"hello"},
		Install: "python -c 'import json' && echo ok > " + VenvPath + "/built"}
	p := prepare(t, c, repo.instance(0), sp)
	joined := strings.Join(p.Layers, ":")
	if p.HostBase || !strings.Contains(joined, b.Record.Layers[0].Hex()) {
		t.Fatalf("task layers %v: want the base's layer %s (host base %v)", p.Layers, b.Record.Layers[0], p.HostBase)
	}
	sb := sandboxOf(t, c.opts.Runtime, p)
	out := sh(t, sb, "hello; read -r x < "+VenvPath+"/built; echo $x; ls /var/lib/apt/lists | grep -c Packages; test -e /usr/bin/git && echo host-leak; cd /testbed && python hello.py")
	if out != "Hello, world!\nok\n0\nhello" {
		t.Fatalf("got %q", out)
	}
	layers, err := c.Layers(ctx, repo.instance(0), sp)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		if !l.Present {
			t.Errorf("layer %s not present after Prepare", l.Ref)
		}
	}
	if p2 := prepare(t, c, repo.instance(0), sp); !p2.Reused || p2.EnvLayer != p.EnvLayer {
		t.Fatalf("second prepare: reused %v, env %s (want %s)", p2.Reused, p2.EnvLayer, p.EnvLayer)
	}
	sp.Base = "debian/nosuch"
	if _, err := c.Prepare(ctx, repo.instance(0), sp, nil); !errors.Is(err, ErrBadBase) {
		t.Fatalf("spec base that is not there: %v, want ErrBadBase", err)
	}
}

func TestDebianBasePackagesRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestDebianBasePackages$")
}
