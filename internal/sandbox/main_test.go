package sandbox

import (
	"fmt"
	"os"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox/sbinit"
	"github.com/minisandbox/msb/internal/vmtest"
)

// testDiskDir is the DiskDir of the tests' runtimes, whose disk pool TestMain
// checks and removes after all tests; "" rootless.
var testDiskDir string

// TestMain lets the test binary serve as the sandbox's init (it re-executes
// itself, as msb does) and as TestCgroupV2's VM's init, and checks, after all tests, that nothing leaked.
func TestMain(m *testing.M) {
	if sbinit.IsChild() {
		sbinit.Main()
	}
	if vmtest.IsGuest() {
		vmtest.GuestMain() // TestCgroupV2's VM booted this binary as its init
	}
	if os.Getenv(envHelper) == helperInterfaces { // run inside a sandbox
		if err := printInterfaces(); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(envHelper) == helperDieClean {
		err := dieInCleanup()
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	if os.Getenv(envHelper) == helperHoldUser {
		err := holdUserSandbox()
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	testDiskDir = privtest.TestPoolDir()
	code := m.Run()
	// The pool's leftover volumes are reported whatever the tests gave: a
	// failed test is often the one that left a volume, and that is when
	// the volume count helps. A failure keeps its exit code.
	if err := privtest.CheckPool(testDiskDir); err != nil {
		fmt.Fprintln(os.Stderr, "leak check:", err)
		if code == 0 {
			code = 1
		}
	}
	if code == 0 {
		if err := privtest.CheckLeaks("/" + privtest.StatePrefix()); err != nil {
			fmt.Fprintln(os.Stderr, "leak check:", err)
			code = 1
		}
	}
	os.Exit(code)
}
