package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/rootfs"
)

// TestSnapshotUser: a plain sandbox on an image whose USER (calc, 1000)
// is not root is snapshotted by name and closed, and the engine with it;
// a fork of the snapshot alone, by a new engine, and a sandbox created on
// the snapshot as its image (snapshot/<name>) run as calc, in its
// sandbox's working directory with its HOME, and find the user's private
// file (0600) their own. A record written before the user was kept (none
// in it) still forks and creates, as root.
func TestSnapshotUser(t *testing.T) {
	ctx := context.Background()
	e1 := snapshotEngine(t)
	g := generated(t)
	const ref = "example.com/msb-test/engine-snapshot-user:1"
	importCalcImage(t, e1, demotest.ImageRootfs(t, g.RepoDir, g.Instances[0].BaseCommit, g.PyVersion), "/home/calc", ref)
	sb, err := e1.CreateSandbox(ctx, SandboxRequest{Image: ref})
	if err != nil {
		t.Fatal(err)
	}
	sh(t, sb, "", "umask 077 && echo secret > key")
	home := sh(t, sb, "", `echo "$HOME"`)
	name := "user-" + sb.ID()
	if _, err := e1.Snapshot(ctx, sb.ID(), api.SnapshotRequest{Name: name}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e1.DeleteSnapshot(name) })
	sb.Close()
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}

	e2 := snapshotEngine(t)
	kids, err := e2.Fork(ctx, "", api.ForkRequest{Snapshot: name})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, kids...)
	const self = `id -u; id -g; pwd; echo "$HOME"; test -O key && test -G key && cat key && echo more >> key`
	want := "1000\n1000\n/home/calc\n" + home + "secret\n"
	if got := sh(t, kids[0], "", self); got != want {
		t.Fatalf("the fork of the snapshot alone: %q, want %q: calc (1000:1000) in /home/calc reading its key", got, want)
	}
	made, err := e2.CreateSandbox(ctx, SandboxRequest{Image: "snapshot/" + name})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, made)
	if got := sh(t, made, "", self); got != want {
		t.Fatalf("a sandbox on the snapshot: %q, want %q: calc (1000:1000) in /home/calc reading its key", got, want)
	}

	// A record of before: no user, so root.
	snap, err := e2.loadSnapshot(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if snap.rec.User != (rootfs.SnapshotUser{UID: 1000, GID: 1000}) {
		t.Fatalf("snapshot record's user %+v, want 1000:1000", snap.rec.User)
	}
	old := snap.rec
	old.Name, old.User = name+"-old", rootfs.SnapshotUser{}
	if err := rootfs.WriteSnapshot(ctx, e2.cache.st(), old); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e2.DeleteSnapshot(old.Name) })
	olds, err := e2.Fork(ctx, "", api.ForkRequest{Snapshot: old.Name})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, olds...)
	if got := sh(t, olds[0], "", "id -u"); got != "0\n" {
		t.Fatalf("the fork of a record without a user runs as %q, want root", got)
	}
	madeOld, err := e2.CreateSandbox(ctx, SandboxRequest{Image: "snapshot/" + old.Name})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, madeOld)
	if got := sh(t, madeOld, "", "id -u"); got != "0\n" {
		t.Fatalf("a sandbox on a record without a user runs as %q, want root", got)
	}
}

// importCalcImage imports into e's cache, as ref, an image of root whose
// USER is calc (1000:1000) with home as its home and working directory,
// which calc owns with all under it (made if root lacks it).
func importCalcImage(t *testing.T, e *Engine, root, home, ref string) {
	t.Helper()
	rel := strings.TrimPrefix(home, "/")
	if err := os.MkdirAll(filepath.Join(root, rel), 0o755); err != nil {
		t.Fatal(err)
	}
	passwd := "root:x:0:0::/root:/bin/bash\ncalc:x:1000:1000::" + home + ":/bin/bash\n"
	if err := os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	img := demotest.ImageOwned(t, root, func(name string) (int, int) {
		if name == rel || strings.HasPrefix(name, rel+"/") {
			return 1000, 1000
		}
		return 0, 0
	})
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	conf := cf.Config
	conf.WorkingDir, conf.User = home, "calc"
	if img, err = mutate.Config(img, conf); err != nil {
		t.Fatal(err)
	}
	importImage(t, e, ref, img)
}
