package cli

import (
	"fmt"
	"net"
	"testing"
)

// TestRunNetworkRules: msb run's --allow and --deny, with listeners on the
// host's 127.0.0.1 as the only targets; --allow alone reaches nothing else.
func TestRunNetworkRules(t *testing.T) {
	state := t.TempDir()
	open, closed := serveOnLoopback(t), serveOnLoopback(t)
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

// serveOnLoopback serves "ok" to every connection on a port of 127.0.0.1
// until the test ends, and returns the port.
func serveOnLoopback(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, "ok")
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}
