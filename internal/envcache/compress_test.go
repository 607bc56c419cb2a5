package envcache

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/store"
)

// TestPrepareOnBtrfs: a cache made on btrfs marks its directory to be
// compressed before anything is written there, so builds and the store
// write compressed files; a task's sandbox stacks its layers from there;
// a cache reopened keeps what its directory says.
func TestPrepareOnBtrfs(t *testing.T) {
	dir := filepath.Join(privtest.Btrfs(t, ""), "cache")
	repo := makeRepo(t, 20, 300, 3)
	rt := testRuntime(t)
	c := openCache(t, Options{Dir: dir, Runtime: rt, Wheelhouse: makeWheelhouse(t)})
	want := store.Compression{Filesystem: "btrfs", Algorithm: store.DefaultCompression, From: "property"}
	for _, d := range []string{dir, filepath.Join(dir, "build"), c.Store().Root()} {
		if got, err := store.DirCompression(d); err != nil || got != want {
			t.Fatalf("DirCompression(%s) = %+v, %v; want %+v", d, got, err, want)
		}
	}
	inst := repo.instance(2)
	p := prepare(t, c, inst, testSpec())
	sb := sandboxOf(t, rt, p)
	if got := sh(t, sb, "git log -1 --format=%H; python -c 'import msbdemo; print(msbdemo.ANSWER)'"); got != inst.BaseCommit+"\n42" {
		t.Fatalf("task on btrfs layers: %q", got)
	}
	// The env layer's largest file went through a build sandbox's upper
	// dir and into the store.
	big := largestFile(t, c.Store().TreePath(mustRef(t, c, EnvRef(p.EnvKey))))
	if n, all := privtest.Extents(t, big); n == 0 {
		t.Fatalf("none of the %d extents of the env layer's %s is compressed", all, big)
	}

	if err := unix.Setxattr(dir, "btrfs.compression", []byte("none"), 0); err != nil {
		t.Fatal(err)
	}
	openCache(t, Options{Dir: dir, Runtime: rt})
	if got, err := store.DirCompression(dir); err != nil || got.Algorithm != "none" {
		t.Fatalf("reopened cache's dir: %+v, %v; want compression=none kept", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "store", "VERSION")); err != nil {
		t.Fatal(err)
	}
}

// largestFile returns the largest regular file under dir; it must be at
// least 64 KiB, larger than btrfs keeps inline.
func largestFile(t *testing.T, dir string) string {
	t.Helper()
	var path string
	var size int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err == nil && fi.Size() > size {
			path, size = p, fi.Size()
		}
		return err
	})
	if err != nil || size < 64<<10 {
		t.Fatalf("largest file under %s: %s, %d bytes, %v", dir, path, size, err)
	}
	return path
}
