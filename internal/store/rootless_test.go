package store

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const rootlessHelperEnv = "MSB_STORE_ROOTLESS_HELPER"

// TestRootlessUserNamespace reruns the overlay commit test as an
// unprivileged user: uid 65534 on the host, root of its own user namespace
// (which maps only itself), mounting overlays with the userxattr option, as
// a rootless sandbox does.
func TestRootlessUserNamespace(t *testing.T) {
	requireRoot(t)
	dir, bin := nobodysTestBinary(t, "msb-rootless-")
	cmd := exec.Command(bin, "-test.run=^TestRootlessHelper$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), rootlessHelperEnv+"="+dir, "TMPDIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 65534, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 65534, Size: 1}},
		// Become the mapped uid: the host sees 65534, not root.
		Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestRootlessHelper") {
		t.Fatalf("rootless helper: %v\n%s", err, out)
	}
}

// nobodysTestBinary is a directory of uid 65534's (removed after t) and
// a copy of this test binary in it, for a child run as that user.
func nobodysTestBinary(t *testing.T, prefix string) (dir, bin string) {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "store.test")
	copyFile(t, self, bin, 0o755)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return dir, bin
}

// TestRootlessHelper is the child of TestRootlessUserNamespace.
func TestRootlessHelper(t *testing.T) {
	dir := os.Getenv(rootlessHelperEnv)
	if dir == "" {
		t.Skip("run by TestRootlessUserNamespace")
	}
	s, err := Open(filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Rootless() {
		t.Fatal("store in a one-uid user namespace does not see itself as rootless")
	}
	base := t.TempDir()
	p := mkdirs(t, base, "lower", "upper", "work", "merged", "check")
	lowerSrc, upper, work, merged, check := p[0], p[1], p[2], p[3], p[4]
	writeTree(t, lowerSrc, lowerTree())
	lowerID, err := s.CommitDir(t.Context(), lowerSrc, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mountOverlay(t, merged, []string{s.TreePath(lowerID)}, upper, work, "userxattr")
	mutate(t, merged)
	want := view(t, merged)
	unmount(t, merged)
	if v, ok, _ := getXattr(filepath.Join(upper, "recreate"), "user.overlay.opaque"); !ok || v != "y" {
		t.Fatal("rootless upper recreate/ has no user.overlay.opaque")
	}
	envID, err := s.CommitDir(t.Context(), upper, CommitOptions{Parents: []LayerID{lowerID}})
	if err != nil {
		t.Fatal(err)
	}
	mountOverlay(t, check, []string{s.TreePath(envID), s.TreePath(lowerID)}, "", "", "userxattr")
	diffViews(t, want, view(t, check))
	unmount(t, check)
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Fatalf("verify: %v %v", err, r.Problems)
	}
	if _, err := s.GC(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t testing.TB, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
