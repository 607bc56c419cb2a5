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
	os.Exit(privtest.RunChecked(m, privtest.Checks{PoolDir: testDiskDir, Mounts: "/" + privtest.StatePrefix()}))
}
