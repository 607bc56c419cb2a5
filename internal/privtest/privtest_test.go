package privtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

const helperEnv = "MSB_PRIVTEST_HELPER"

// TestHelperSkip is run by TestSkipFailsWhenStrict in a child process.
func TestHelperSkip(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("run by TestSkipFailsWhenStrict")
	}
	Skip(t, "no such feature on this host")
}

// TestSkipFailsWhenStrict: under MSB_TEST_STRICT=1 (make test) a skip for
// a missing feature is a failure; otherwise it is a skip.
func TestSkipFailsWhenStrict(t *testing.T) {
	for _, tc := range []struct {
		strict   string
		wantFail bool
	}{{"1", true}, {"", false}} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSkip$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"=1", StrictEnv+"="+tc.strict)
		out, err := cmd.CombinedOutput()
		failed := err != nil
		if failed != tc.wantFail || !strings.Contains(string(out), "no such feature") {
			t.Errorf("%s=%q: failed %v, want %v:\n%s", StrictEnv, tc.strict, failed, tc.wantFail, out)
		}
		if !tc.wantFail && !strings.Contains(string(out), "--- SKIP") {
			t.Errorf("not strict: want a skip:\n%s", out)
		}
	}
}

// TestLeaksOwnStateDirsOnly: the leak check given StatePrefix counts a
// mount naming one of this process's state dirs, and not one naming
// another process's (another package's tests, running beside these on
// the host's mount table, mount over theirs).
func TestLeaksOwnStateDirsOnly(t *testing.T) {
	RequireRoot(t)
	base := t.TempDir()
	t.Setenv(StateBaseEnv, base)
	own := StateDir(t)
	other, err := os.MkdirTemp(base, "msb-test-state-1-")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{own, other} {
		mnt := filepath.Join(dir, "mnt")
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, ""); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH); os.Remove(mnt) })
	}
	var mounts []string
	for _, l := range Leaks("/" + StatePrefix()) {
		if strings.HasPrefix(l, "mount: ") {
			mounts = append(mounts, l)
		}
	}
	if len(mounts) != 1 || !strings.Contains(mounts[0], own+"/mnt ") {
		t.Fatalf("leaks %q: want the one mount on %s/mnt", mounts, own)
	}
}
