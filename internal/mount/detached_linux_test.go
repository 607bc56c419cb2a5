package mount_test

import (
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
