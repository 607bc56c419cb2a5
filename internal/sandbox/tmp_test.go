package sandbox

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// renameFromTmp moves a file and a directory from /tmp to /dst with
// rename(2) itself (os.rename; mv would fall back to a copy on EXDEV) and
// prints what arrived, or the error.
const renameFromTmp = `mkdir -p /dst /tmp/d && echo moved > /tmp/f && echo in-dir > /tmp/d/g && python3 -c '
import os
try:
    os.rename("/tmp/f", "/dst/f"); os.rename("/tmp/d", "/dst/d")
except OSError as e:
    print(e.strerror)
' && cat /dst/f /dst/d/g 2>/dev/null; rm -rf /dst /tmp/f /tmp/d`

// testTmpOnRoot: a sandbox with a disk has /tmp as a directory of its
// root, as a container has it (go-zero's TestRotateLoggerRotate renames a
// file from /tmp into the repository): no mount of its own, mode 1777
// where the layers have no /tmp, a rename(2) from it to elsewhere in the
// root works, and the writable layer (what a snapshot takes) holds its
// files. A reset to such a layer brings them back, and drops what was
// written since. Without a disk (a writable tree on the host) /tmp stays
// a tmpfs of TmpBytes (testTmpQuota), where the rename fails with EXDEV.
func testTmpOnRoot(t *testing.T, rt *Runtime) {
	noTmp := t.TempDir() // a layer without /tmp, as an image may be
	os.Chmod(noTmp, 0o755)
	os.WriteFile(filepath.Join(noTmp, "f"), []byte("layer\n"), 0o644)
	for _, tc := range []struct {
		name string
		conf Config
	}{
		{"HostBase", Config{HostBase: true, Limits: Limits{DiskBytes: 64 << 20}}},
		{"LayerWithoutTmp", Config{HostBase: true, Layers: []string{noTmp}, Limits: Limits{DiskBytes: 64 << 20}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := create(t, rt, tc.conf)
			const look = `awk '$5 == "/tmp" {print "mount:", $9}' /proc/self/mountinfo; stat -c '%a %F' /tmp`
			if got := mustOK(t, sb, look); got != "1777 directory\n" {
				t.Errorf("/tmp: %q, want a directory of the root, mode 1777, no mount", got)
			}
			if got := mustOK(t, sb, "stat -c %a /dev/shm"); got != "1777\n" {
				t.Errorf("/dev/shm has mode %q, want 1777 (sticky, as a container's)", got)
			}
			if got := mustOK(t, sb, renameFromTmp); got != "moved\nin-dir\n" {
				t.Errorf("rename(2) from /tmp to /dst: %q, want the file and the dir moved", got)
			}
			mustOK(t, sb, "echo kept > /tmp/kept")
			dir, err := sb.WritableDir()
			if err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "tmp", "kept")); string(b) != "kept\n" {
				t.Fatalf("the writable dir holds /tmp/kept as %q (%v), want it as a snapshot takes it", b, err)
			}
			if err := sb.CanReset(); err != nil {
				t.Logf("no reset here (TestReset checks why): %v", err)
				return
			}
			// A snapshot's layer: the writable dir as it is now.
			snap := t.TempDir()
			copyTree(t, dir, snap)
			mustOK(t, sb, "echo later > /tmp/later")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := sb.Reset(ctx, Deferred{Layers: append(append([]string(nil), tc.conf.Layers...), snap)}); err != nil {
				t.Fatal(err)
			}
			if got := mustOK(t, sb, "cat /tmp/kept; ls /tmp/later 2>&1 >/dev/null | wc -l; "+look); got != "kept\n1\n1777 directory\n" {
				t.Errorf("after a reset to the snapshot: %q, want /tmp/kept, no /tmp/later, /tmp a directory", got)
			}
			// To creation: the layers' /tmp, made again where they have none.
			if err := sb.Reset(ctx, Deferred{Layers: tc.conf.Layers}); err != nil {
				t.Fatal(err)
			}
			if got := mustOK(t, sb, "ls -A /tmp | grep -c kept; "+look); got != "0\n1777 directory\n" {
				t.Errorf("after a reset to the layers: %q, want an empty /tmp, a directory of mode 1777", got)
			}
			if got := mustOK(t, sb, renameFromTmp); got != "moved\nin-dir\n" {
				t.Errorf("rename(2) from /tmp to /dst after the resets: %q", got)
			}
		})
	}
	t.Run("NoDisk", func(t *testing.T) {
		sb := createKeptUpper(t, rt, Limits{})
		if got := mustOK(t, sb, `awk '$5 == "/tmp" {print $9}' /proc/self/mountinfo`); got != "tmpfs\n" {
			t.Errorf("/tmp of a sandbox without a disk is mounted as %q, want a tmpfs", got)
		}
		if got := mustOK(t, sb, renameFromTmp); !strings.Contains(got, "cross-device") {
			t.Errorf("rename(2) from the tmpfs /tmp to the root: %q, want EXDEV", got)
		}
	})
}

// copyTree copies the directories, files and symlinks of src into dst,
// with their modes, in this process (src may be a path through its
// /proc/self/fd).
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if rel != "." {
				if err := os.Mkdir(to, 0o700); err != nil {
					return err
				}
			}
			return os.Chmod(to, fi.Mode()&(fs.ModePerm|fs.ModeSticky))
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, to)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, b, fi.Mode().Perm())
		}
		return fmt.Errorf("%s: a %s, which the copy does not take", p, fi.Mode().Type())
	})
	if err != nil {
		t.Fatalf("copying %s: %v", src, err)
	}
}
