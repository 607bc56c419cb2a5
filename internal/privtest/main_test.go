package privtest

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// afterEnv, in TestRunCheckedFails's child, is the error After returns.
const afterEnv = "MSB_PRIVTEST_AFTER"

func TestMain(m *testing.M) {
	pool := TestPoolDir()
	os.Exit(RunChecked(m, Checks{PoolDir: pool, Mounts: "/" + StatePrefix(), After: func() error {
		if msg := os.Getenv(afterEnv); msg != "" {
			return errors.New(msg)
		}
		if _, err := os.Stat(pool); pool != "" && !errors.Is(err, os.ErrNotExist) {
			return errors.New("the pool dir outlived CheckPool")
		}
		return nil
	}}))
}

// TestRunCheckedFails: a check that fails after tests that passed fails
// the binary (exit code 1), saying what failed; with none failing the
// binary passes.
func TestRunCheckedFails(t *testing.T) {
	for _, msg := range []string{"the fixture would not go", ""} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSkip$", "-test.count=1")
		cmd.Env = append(os.Environ(), afterEnv+"="+msg, StrictEnv+"=")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		switch {
		case msg == "" && err != nil:
			t.Errorf("no check failing: %v\n%s", err, out)
		case msg != "" && (!errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), msg)):
			t.Errorf("After failing: %v, want exit code 1 saying %q:\n%s", err, msg, out)
		}
	}
}
