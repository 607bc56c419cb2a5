package envcache

import (
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestRootless reruns TestPrepareSandbox, TestCopyMode, the install layer
// tests, TestDeltaRepoLayer and TestImageBaseEnv as an unprivileged user:
// its own cache, a rootless store and rootless sandboxes.
func TestRootless(t *testing.T) {
	privtest.Unprivileged(t, "^(TestPrepareSandbox|TestCopyMode|TestInstallLayer|TestInstallLayerDedup|TestDeltaRepoLayer|TestImageBaseEnv)$")
}
