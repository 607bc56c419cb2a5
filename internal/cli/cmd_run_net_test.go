package cli

import (
	"fmt"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestRunNetworkRules: msb run's --allow and --deny, with listeners on the
// host's 127.0.0.1 as the only targets; --allow alone reaches nothing else.
func TestRunNetworkRules(t *testing.T) {
	state := t.TempDir()
	open, closed := privtest.ServeOK(t), privtest.ServeOK(t)
	connect := func(port int) string {
		return fmt.Sprintf("exec 3<>/dev/tcp/10.0.2.2/%d && head -c2 <&3 | grep -qx ok", port)
	}
	allow := fmt.Sprintf("127.0.0.1:%d", open)
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"run", "--allow", allow, "--", "timeout", "5", "bash", "-c", connect(open)}, 0},
		{[]string{"run", "--allow", allow, "--", "timeout", "5", "bash", "-c", connect(closed)}, 1},
		{[]string{"run", "--allow", "127.0.0.1", "--deny", "10.0.0.0/8", "--", "timeout", "5", "bash", "-c", connect(closed)}, 0},
		{[]string{"run", "--deny", "10.0.0.0/8", "--", "timeout", "5", "bash", "-c", connect(open)}, 1},
		{[]string{"run", "--", "timeout", "5", "bash", "-c", connect(open)}, 1},
		{[]string{"run", "--allow", "10.0.0.0/40", "--", "true"}, exitInvalidConfig},
		{[]string{"run", "--network", "host", "--allow", allow, "--", "true"}, exitInvalidConfig},
	} {
		if got := Main(append([]string{"--state-dir", state}, tc.args...)); got != tc.want {
			t.Errorf("msb %v exited %d, want %d", tc.args, got, tc.want)
		}
	}
}
