package sandbox

import (
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// rootlessUser is the unprivileged account the rootless suite runs as; the
// test creates it when missing.
const rootlessUser = "msbtest"

// TestRootless reruns the whole suite as an unprivileged user, through user
// namespaces, with no setuid helper.
func TestRootless(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: TestSuite covers the rootless mode")
	}
	u := ensureUser(t)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// The test binary lives in a root-only build dir; copy it somewhere the
	// user can execute, with a state base it owns.
	dir, err := os.MkdirTemp("", "msb-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	exe := filepath.Join(dir, "sandbox.test")
	copyFile(t, "/proc/self/exe", exe)
	state := filepath.Join(dir, "state")
	os.Mkdir(state, 0o755)
	os.Chown(state, uid, gid)
	// The child's own timeout is shorter than any sane parent timeout, so
	// a hang is reported with the child's output.
	args := []string{"-test.run=^TestSuite$", "-test.count=1", "-test.timeout=10m"}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	cmd := exec.Command(exe, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + u.HomeDir, "MSB_TEST_STATE_BASE=" + state, "MSB_TEST_STRICT=" + os.Getenv("MSB_TEST_STRICT"), "TMPDIR=" + state}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	t.Logf("rootless suite as %s (uid %d):\n%s", rootlessUser, uid, out)
	if err != nil {
		t.Fatalf("rootless suite failed: %v", err)
	}
}

func ensureUser(t *testing.T) *user.User {
	t.Helper()
	if u, err := user.Lookup(rootlessUser); err == nil {
		return u
	}
	if out, err := exec.Command("useradd", "--create-home", "--shell", "/bin/bash", rootlessUser).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v: %s", rootlessUser, err, out)
	}
	u, err := user.Lookup(rootlessUser)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
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
