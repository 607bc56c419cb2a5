package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/minisandbox/msb/internal/privtest"
)

const btrfsEnv = "MSB_TEST_BTRFS_DIR"

// TestCompressOnBtrfs: a store made on btrfs marks itself to be compressed
// with zstd, and the content it writes is stored compressed; a choice the
// mount or the directory already made is kept.
func TestCompressOnBtrfs(t *testing.T) {
	t.Run("new store", func(t *testing.T) {
		checkCompressedStore(t, filepath.Join(privtest.Btrfs(t, ""), "cache"))
	})
	t.Run("the mount's choice", func(t *testing.T) {
		s, err := Open(filepath.Join(privtest.Btrfs(t, "compress=lzo"), "cache"))
		if err != nil {
			t.Fatal(err)
		}
		if v, ok, _ := getXattr(s.Root(), compressionXattr); ok {
			t.Fatalf("store on a compress=lzo mount got %s=%q", compressionXattr, v)
		}
		wantCompression(t, s.Root(), Compression{Filesystem: "btrfs", Algorithm: "lzo", From: "mount"})
		if n, all := commitBig(t, s); n != all || all == 0 {
			t.Fatalf("%d of %d extents compressed on a compress=lzo mount, want all", n, all)
		}
	})
	t.Run("the directory's choice", func(t *testing.T) {
		root := filepath.Join(privtest.Btrfs(t, ""), "cache")
		if err := os.Mkdir(root, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Setxattr(root, compressionXattr, []byte("none"), 0); err != nil {
			t.Fatal(err)
		}
		s, err := Open(root)
		if err != nil {
			t.Fatal(err)
		}
		wantCompression(t, root, Compression{Filesystem: "btrfs", Algorithm: "none", From: "property"})
		if n, all := commitBig(t, s); n != 0 || all == 0 {
			t.Fatalf("%d of %d extents compressed under compression=none, want none", n, all)
		}
		if u, err := s.Usage(t.Context()); err != nil || u.Compression.Compressed() {
			t.Fatalf("usage says compressed under compression=none: %+v, %v", u.Compression, err)
		}
	})
}

// TestCompressElsewhere: off btrfs, CompressDir leaves the directory alone.
func TestCompressElsewhere(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == btrfsSuperMagic {
		t.Skip("the temp dir is on btrfs; TestCompressOnBtrfs covers it")
	}
	on, err := CompressDir(dir)
	if on || err != nil {
		t.Fatalf("CompressDir off btrfs = %v, %v; want false, nil", on, err)
	}
	wantCompression(t, dir, Compression{})
}

// TestCompressRootless: an unprivileged owner's store on btrfs compresses
// too (the property needs no privilege).
func TestCompressRootless(t *testing.T) {
	mnt := privtest.Btrfs(t, "")
	uid, gid := privtest.UserIDs(t)
	if err := os.Chown(mnt, uid, gid); err != nil {
		t.Fatal(err)
	}
	privtest.UnprivilegedEnv(t, "^TestCompressRootlessChild$", btrfsEnv+"="+mnt)
}

// TestCompressRootlessChild is TestCompressRootless's rerun.
func TestCompressRootlessChild(t *testing.T) {
	mnt := os.Getenv(btrfsEnv)
	if mnt == "" {
		t.Skip("run by TestCompressRootless")
	}
	checkCompressedStore(t, filepath.Join(mnt, "cache"))
}

// checkCompressedStore opens a new store at root, on btrfs, and checks that
// it marked itself and that what it commits is stored compressed.
func checkCompressedStore(t *testing.T, root string) {
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	want := Compression{Filesystem: "btrfs", Algorithm: DefaultCompression, From: "property"}
	wantCompression(t, s.Root(), want)
	wantCompression(t, s.path("inodes", "00"), want) // inherited
	if n, all := commitBig(t, s); n != all || all == 0 {
		t.Fatalf("%d of %d extents of a committed file compressed, want all", n, all)
	}
	u, err := s.Usage(t.Context())
	if err != nil || u.Compression != want {
		t.Fatalf("usage's compression = %+v, %v; want %+v", u.Compression, err, want)
	}
}

func wantCompression(t *testing.T, dir string, want Compression) {
	t.Helper()
	got, err := DirCompression(dir)
	if err != nil || got != want {
		t.Fatalf("DirCompression(%s) = %+v, %v; want %+v", dir, got, err, want)
	}
}

// commitBig commits a layer holding 1 MiB of text and returns how many of
// the extents of its file in the layer's tree the filesystem stores
// compressed, and how many there are.
func commitBig(t *testing.T, s *Store) (compressed, all int) {
	t.Helper()
	src := t.TempDir()
	writeTree(t, src, map[string]node{"big.txt": {content: strings.Repeat("def f(x):\n    return x + 1\n", 40000)}})
	id, err := s.CommitDir(t.Context(), src, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return privtest.Extents(t, filepath.Join(s.TreePath(id), "big.txt"))
}
