package sandbox

import (
	"os"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestRootless reruns the whole suite as an unprivileged user, through user
// namespaces; only its User case (and TestRootlessUserWithoutSubIDs) uses
// the setuid helpers newuidmap and newgidmap, with the subordinate ids
// privtest.Unprivileged gives the user.
func TestRootless(t *testing.T) {
	privtest.Unprivileged(t, "^(TestSuite|TestSupervisorUnderFullPidsLimit|TestSessionAhead|TestRootlessUserWithoutSubIDs|TestRootlessOwnersNeedUser|TestUserCheck|TestImageRootProbes)$")
}

// delegatedCases are the suite's limit and cleanup tests, which the
// delegated-cgroup reruns repeat.
const delegatedCases = "^TestSuite$/^(Basics|ForkBomb|MemoryBomb|MemoryAcrossProcesses|SmallMemoryConcurrentExecs|" +
	"CloseKillsEverything|GC|GCPidReused|KilledDuringCleanup|DiskLimit|Concurrent|MemoryBoundWithoutCgroup|FreezeWritableDir|CgroupFS)$"

// TestRootlessDelegatedCgroup reruns the suite's limit and cleanup tests as
// the unprivileged user with a cgroup v1 subtree delegated to it
// (MSB_CGROUP_PARENT): the limits hold as a cgroup's, for all of a
// sandbox's processes together, and nothing is left in the subtree.
func TestRootlessDelegatedCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: TestRootless's root parent runs this")
	}
	parent, _ := privtest.DelegateCgroupV1(t)
	privtest.UnprivilegedEnv(t, delegatedCases, "MSB_CGROUP_PARENT="+parent)
}

// TestRootlessOwnCgroupV1 is TestRootlessDelegatedCgroup with the user's
// process started in the delegated directories and no MSB_CGROUP_PARENT:
// msb finds its own cgroup writable and makes its groups below it.
func TestRootlessOwnCgroupV1(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: TestRootless's root parent runs this")
	}
	_, dirs := privtest.DelegateCgroupV1(t)
	privtest.UnprivilegedIn(t, delegatedCases, dirs, wantCgroupEnv+"=v1")
}
