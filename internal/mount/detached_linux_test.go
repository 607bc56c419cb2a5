package mount_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/mount"
	"github.com/minisandbox/msb/internal/privtest"
	"golang.org/x/sys/unix"
)

// TestDetached: a tmpfs made with options and attributes, attached
// nowhere, takes them; a refused option is named in the error.
func TestDetached(t *testing.T) {
	privtest.RequireRoot(t)
	mnt, err := mount.Detached("tmpfs", []string{"mode=0710", "size=1m"}, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(mnt)
	var st unix.Stat_t
	if err := unix.Fstat(mnt, &st); err != nil || st.Mode&0o7777 != 0o710 {
		t.Fatalf("the tmpfs's root: mode %o, %v; want 710", st.Mode&0o7777, err)
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(mnt, &fs); err != nil || fs.Flags&unix.ST_RDONLY == 0 || fs.Flags&unix.ST_NOSUID == 0 || fs.Blocks*uint64(fs.Bsize) != 1<<20 {
		t.Fatalf("the tmpfs: flags %#x, %d bytes, %v; want read-only, nosuid, 1 MiB", fs.Flags, fs.Blocks*uint64(fs.Bsize), err)
	}
	if _, err := mount.Detached("tmpfs", []string{"size=1m", "no_such_option=1"}, 0); err == nil || !strings.Contains(err.Error(), "no_such_option=1") {
		t.Fatalf("an unknown option: %v, want an error naming it", err)
	}
	if _, err := mount.Detached("overlay", []string{"lowerdir=" + t.TempDir() + "/absent"}, 0); err == nil {
		t.Fatal("an overlay of an absent dir was made")
	}
}

// TestDetachedManyLowers: an overlay of 40 lower dirs named as
// /proc/self/fd/N (as a sandbox's root names them), some 700 bytes of
// lowerdir, more than one fsconfig string takes (256 bytes), is made,
// each lower dir in its place: the top one's file hides the others', every
// lower dir's own file shows, and an escaped ':' in a path is one path.
func TestDetachedManyLowers(t *testing.T) {
	privtest.RequireRoot(t)
	const n = 40
	var lowers []string // top first, as lowerdir takes them
	for i := range n {
		d := filepath.Join(t.TempDir(), "l:"+strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string]string{"who": strconv.Itoa(i), "own" + strconv.Itoa(i): ""} {
			if err := os.WriteFile(filepath.Join(d, name), []byte(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		p := d
		if i%2 == 0 { // by descriptor, as a sandbox's are; the others by their escaped paths
			fd, err := unix.Open(d, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			p = "/proc/self/fd/" + strconv.Itoa(fd)
		}
		lowers = append(lowers, strings.ReplaceAll(p, ":", `\:`))
	}
	opt := "lowerdir=" + strings.Join(lowers, ":")
	if len(opt) <= 256 {
		t.Fatalf("%d bytes of lowerdir: the test wants more than fsconfig takes at once", len(opt))
	}
	mnt, err := mount.Detached("overlay", []string{opt}, unix.MOUNT_ATTR_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(mnt)
	root := "/proc/self/fd/" + strconv.Itoa(mnt)
	if b, err := os.ReadFile(filepath.Join(root, "who")); err != nil || string(b) != "0" {
		t.Fatalf("the overlay's who: %q %v, want the top lower dir's 0", b, err)
	}
	ents, err := os.ReadDir(root)
	if err != nil || len(ents) != n+1 {
		t.Fatalf("the overlay holds %d entries (%v), want %d: each lower dir's own file and who", len(ents), err, n+1)
	}
}
