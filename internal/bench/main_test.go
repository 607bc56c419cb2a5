package bench

import (
	"fmt"
	"os"
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
	code := m.Run()
	if code == 0 {
		if err := privtest.CheckLeaks("msb-test-state-"); err != nil {
			fmt.Fprintln(os.Stderr, "leak check:", err)
			code = 1
		}
	}
	os.Exit(code)
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
