package envcache

import (
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestRootless reruns TestPrepareSandbox and TestCopyMode as an
// unprivileged user: its own cache, a rootless store and rootless sandboxes.
func TestRootless(t *testing.T) {
	privtest.Unprivileged(t, "^(TestPrepareSandbox|TestCopyMode)$")
}
