package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/sandbox/sbinit"
)

// TestMain lets the test binary serve as the sandbox's init (it
// re-executes itself, as msb does) and checks, after all tests, that no
// sandbox or mount outlived them.
func TestMain(m *testing.M) {
	if sbinit.IsChild() {
		sbinit.Main()
	}
	os.Exit(privtest.RunChecked(m, privtest.Checks{OwnPool: true, Mounts: "/" + privtest.StatePrefix()}))
}

func testRuntime(t testing.TB) *sandbox.Runtime {
	t.Helper()
	rt, err := sandbox.NewRuntime(sandbox.RuntimeOptions{StateDir: privtest.StateDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	return rt
}

// buildMSB builds the msb binary into a temp dir for the whole-process
// measure, and returns the options that run it with a state dir of its
// own.
func buildMSB(t *testing.T) (exe string, args []string) {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", dir, "github.com/minisandbox/msb/cmd/msb").CombinedOutput(); err != nil {
		t.Fatalf("building msb: %v: %s", err, out)
	}
	return filepath.Join(dir, "msb"), []string{"--state-dir", privtest.StateDir(t)}
}
