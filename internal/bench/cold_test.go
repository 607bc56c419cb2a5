package bench

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// pageCacheDir is a directory on a filesystem whose page cache can be
// dropped (not tmpfs, whose pages are its storage).
func pageCacheDir(t *testing.T) string {
	t.Helper()
	for _, d := range []string{t.TempDir(), "/var/tmp"} {
		var st unix.Statfs_t
		if unix.Statfs(d, &st) == nil && st.Type != unix.TMPFS_MAGIC {
			dir, err := os.MkdirTemp(d, "msb-bench-test-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	t.Skip("no disk-backed directory: the temp dir and /var/tmp are tmpfs")
	return ""
}

func TestDropCache(t *testing.T) {
	dir := pageCacheDir(t)
	data := make([]byte, 4<<20)
	rand.Read(data)
	a := filepath.Join(dir, "a")
	if err := os.WriteFile(a, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(a, filepath.Join(dir, "a-link")); err != nil { // the same inode: counted once
		t.Fatal(err)
	}
	os.Symlink("/etc/passwd", filepath.Join(dir, "out")) // not followed
	if _, err := os.ReadFile(a); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before, err := Resident(ctx, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if before.Files != 1 || before.Bytes != int64(len(data)) || before.Resident == 0 {
		t.Fatalf("before the drop: %+v (want one file of %d bytes, some of it resident)", before, len(data))
	}
	st, err := DropCache(ctx, []string{dir, filepath.Join(dir, "missing")})
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 1 {
		t.Fatalf("dropped %d files, want 1", st.Files)
	}
	after, err := Resident(ctx, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if after.Resident != 0 {
		t.Fatalf("%d bytes still resident after the drop", after.Resident)
	}
}

func TestDiskBytesCountsInodesOnce(t *testing.T) {
	dir := t.TempDir()
	f, sub := filepath.Join(dir, "f"), filepath.Join(dir, "sub")
	os.WriteFile(f, make([]byte, 1<<20), 0o644)
	os.Mkdir(sub, 0o755)
	if err := os.Link(f, filepath.Join(sub, "g")); err != nil {
		t.Fatal(err)
	}
	one, err := diskBytes(f)
	if err != nil || one < 1<<20 {
		t.Fatalf("one file of 1 MiB: %d bytes, %v", one, err)
	}
	// sub holds a hard link to f: f and sub together are sub alone
	both, err := diskBytes(f, sub)
	if err != nil {
		t.Fatal(err)
	}
	alone, _ := diskBytes(sub)
	if both != alone || alone < one {
		t.Fatalf("f+sub = %d bytes, sub = %d, f = %d: a hard link was counted twice or not at all", both, alone, one)
	}
}
