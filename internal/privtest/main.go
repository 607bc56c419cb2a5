package privtest

import (
	"fmt"
	"os"
	"testing"
)

// Checks are what RunChecked checks after a test binary's tests.
type Checks struct {
	// PoolDir is the disk pool dir (TestPoolDir) the tests' runtimes
	// were given: CheckPool checks and removes it whatever the tests
	// gave, since a failed test is often the one that left a volume.
	PoolDir string
	// OwnPool gives the tests a disk pool of their own (OwnDiskPool),
	// removed after them.
	OwnPool bool
	// After runs after the tests and the pools (a fixture's removal);
	// its error, which says what failed, fails the binary.
	After func() error
	// Mounts marks this binary's mounts for the leak check (CheckLeaks),
	// made when everything else passed.
	Mounts string
}

// RunChecked runs the tests (m.Run), then the checks, and returns the
// binary's exit code: the tests' own if they failed, else 1 when a check
// fails, saying which on stderr. A TestMain ends with
// os.Exit(privtest.RunChecked(m, ...)).
func RunChecked(m *testing.M, c Checks) int {
	release := func() {}
	if c.OwnPool {
		release = OwnDiskPool()
	}
	code := m.Run()
	release()
	fail := func(err error) {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	if err := CheckPool(c.PoolDir); err != nil {
		fail(fmt.Errorf("leak check: %w", err))
	}
	if c.After != nil {
		fail(c.After())
	}
	if code == 0 {
		if err := CheckLeaks(c.Mounts); err != nil {
			fail(fmt.Errorf("leak check: %w", err))
		}
	}
	return code
}
