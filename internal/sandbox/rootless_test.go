package sandbox

import (
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestRootless reruns the whole suite as an unprivileged user, through user
// namespaces, with no setuid helper.
func TestRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestSuite$")
}
