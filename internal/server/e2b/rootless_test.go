package e2b

import (
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestE2BRootless reruns the tests that need no SDK as an unprivileged
// user: watchers through /proc/<init>/root, metrics and logs, auto-pause
// and auto-resume across a restart, the login
// shell, its primed shell and the base's spare in the rootless mode.
func TestE2BRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestE2B(AutoPauseRestart|AutoPauseRacesPause|BaseMode|WatchStaysInSandbox|WatchEndsWithSandbox|Logs|Metrics|ListBadQueries|LoginShell|PrimedShell|Spare|SpareYieldsRoom)$")
}
