package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/rootfs"
)

// TestSnapshotUserFork: a plain sandbox on an image whose USER (calc,
// 1000) is not root is snapshotted by name and closed, and the engine
// with it; a fork of the snapshot alone, by a new engine, runs as calc and
// finds the user's private file its own. A record written before the
// user was kept (none in it) still forks, as root.
func TestSnapshotUserFork(t *testing.T) {
	ctx := context.Background()
	e1 := snapshotEngine(t)
	ref := importUserImage(t, e1)
	sb, err := e1.CreateSandbox(ctx, SandboxRequest{Image: ref})
	if err != nil {
		t.Fatal(err)
	}
	sh(t, sb, "", "umask 077 && echo secret > key")
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
	if got := sh(t, kids[0], "", "id -u; id -g; pwd; cat key"); got != "1000\n1000\n/home/calc\nsecret\n" {
		t.Fatalf("the fork of the snapshot alone: %q, want calc (1000:1000) in /home/calc reading its key", got)
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
}

// TestSnapshotUserForkRootless reruns TestSnapshotUserFork as an
// unprivileged user with subordinate ids.
func TestSnapshotUserForkRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestSnapshotUserFork$")
}

// importUserImage imports into e's cache an image of the demo's root
// whose USER is calc (1000:1000, home /home/calc, its working directory)
// and returns its reference.
func importUserImage(t *testing.T, e *Engine) string {
	t.Helper()
	g := generated(t)
	root := demotest.ImageRootfs(t, g.RepoDir, g.Instances[0].BaseCommit, g.PyVersion)
	if err := os.MkdirAll(filepath.Join(root, "home", "calc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte("root:x:0:0::/root:/bin/bash\ncalc:x:1000:1000::/home/calc:/bin/bash\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := demotest.ImageOwned(t, root, func(rel string) (int, int) {
		if rel == "home/calc" {
			return 1000, 1000
		}
		return 0, 0
	})
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	conf := cf.Config
	conf.WorkingDir, conf.User = "/home/calc", "calc"
	if img, err = mutate.Config(img, conf); err != nil {
		t.Fatal(err)
	}
	const ref = "example.com/msb-test/engine-snapshot-user:1"
	importImage(t, e, ref, img)
	return ref
}
