package sandbox

import (
	"os"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestRootless reruns the whole suite as an unprivileged user, through user
// namespaces, with no setuid helper.
func TestRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestSuite$")
}

// TestRootlessDelegatedCgroup reruns the suite's limit and cleanup tests as
// the unprivileged user with a cgroup v1 subtree delegated to it
// (MSB_CGROUP_PARENT): the limits hold as a cgroup's, for all of a
// sandbox's processes together, and nothing is left in the subtree.
func TestRootlessDelegatedCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: TestRootless's root parent runs this")
	}
	parent := privtest.DelegateCgroupV1(t)
	privtest.UnprivilegedEnv(t, "^TestSuite$/^(Basics|ForkBomb|MemoryBomb|MemoryAcrossProcesses|SmallMemoryConcurrentExecs|"+
		"CloseKillsEverything|GC|KilledDuringCleanup|DiskLimit|Concurrent|MemoryBoundWithoutCgroup)$", "MSB_CGROUP_PARENT="+parent)
}
