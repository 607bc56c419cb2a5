package envcache

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

const rootlessUser = "msbtest"

// TestRootless reruns TestPrepareSandbox and TestCopyMode as an
// unprivileged user: its own cache, a rootless store and rootless sandboxes.
func TestRootless(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the other tests cover the rootless mode")
	}
	u, err := user.Lookup(rootlessUser)
	if err != nil {
		if out, err := exec.Command("useradd", "--create-home", "--shell", "/bin/bash", rootlessUser).CombinedOutput(); err != nil {
			t.Fatalf("useradd: %v: %s", err, out)
		}
		if u, err = user.Lookup(rootlessUser); err != nil {
			t.Fatal(err)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "msb-envcache-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	defer removeAll(dir)
	os.Chmod(dir, 0o755)
	exe := filepath.Join(dir, "envcache.test")
	in, _ := os.Open("/proc/self/exe")
	outf, _ := os.OpenFile(exe, os.O_CREATE|os.O_WRONLY, 0o755)
	io.Copy(outf, in)
	in.Close()
	outf.Close()
	state := filepath.Join(dir, "state")
	os.Mkdir(state, 0o755)
	os.Chown(state, uid, gid)
	args := []string{"-test.run=^(TestPrepareSandbox|TestCopyMode)$", "-test.count=1", "-test.timeout=8m"}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	cmd := exec.Command(exe, args...)
	cmd.Dir = state
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + u.HomeDir, "MSB_TEST_STATE_BASE=" + state, "TMPDIR=" + state, "MSB_TEST_STRICT=" + os.Getenv("MSB_TEST_STRICT")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	t.Logf("as %s (uid %d):\n%s", rootlessUser, uid, out)
	if err != nil {
		t.Fatalf("rootless run failed: %v", err)
	}
}
