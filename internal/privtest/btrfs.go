package privtest

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Btrfs makes a 256 MiB btrfs in a sparse file, mounts it on a loop device
// with the mount options opts (none when empty) and returns its mount
// point, owned by root and reachable by anyone; it is unmounted after the test, and the loop device
// detaches with it. It needs root (RequireRoot) and mkfs.btrfs
// (btrfs-progs; Skip otherwise).
func Btrfs(t *testing.T, opts string) string {
	t.Helper()
	RequireRoot(t)
	mkfs, err := exec.LookPath("mkfs.btrfs")
	if err != nil {
		Skip(t, "mkfs.btrfs not found (install btrfs-progs)")
	}
	dir := t.TempDir()
	// Reachable by an Unprivileged rerun given the mount point.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(256 << 20)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mkfs, "-q", "-f", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.btrfs: %v: %s", err, out)
	}
	o := "loop"
	if opts != "" {
		o += "," + opts
	}
	if out, err := exec.Command("mount", "-t", "btrfs", "-o", o, img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount -o %s: %v: %s", o, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	return mnt
}

// UserIDs returns the uid and gid of User, creating the account when
// missing: for a directory that a test gives to its Unprivileged rerun.
func UserIDs(t *testing.T) (uid, gid int) {
	t.Helper()
	u := ensureUser(t)
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid
}

// FIEMAP (linux/fiemap.h): the request header, one extent record, the
// flags used here.
const (
	fsIOCFiemap       = 0xc020660b // _IOWR('f', 11, struct fiemap)
	fiemapHeader      = 32
	fiemapExtent      = 56
	fiemapFlagSync    = 0x1
	fiemapExtentCoded = 0x8 // FIEMAP_EXTENT_ENCODED: compressed on btrfs
)

// Extents maps path's data with FIEMAP and counts its extents and those
// stored encoded.
func Extents(t *testing.T, path string) (encoded, all int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const n = 512
	buf := make([]byte, fiemapHeader+n*fiemapExtent)
	ne := binary.NativeEndian
	ne.PutUint64(buf[8:], ^uint64(0)) // fm_length: to the end
	ne.PutUint32(buf[16:], fiemapFlagSync)
	ne.PutUint32(buf[24:], n) // fm_extent_count
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIOCFiemap, uintptr(unsafe.Pointer(&buf[0]))); errno != 0 {
		t.Fatalf("FIEMAP %s: %v", path, errno)
	}
	mapped := int(ne.Uint32(buf[20:]))
	for i := range mapped {
		flags := ne.Uint32(buf[fiemapHeader+i*fiemapExtent+40:])
		all++
		if flags&fiemapExtentCoded != 0 {
			encoded++
		}
	}
	return encoded, all
}
