package server

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
)

// TestServerNetworkRules: allow_out and deny_out of a create hold in the
// sandbox, with listeners on the host's 127.0.0.1 as the only targets,
// and a bad entry is invalid_config.
func TestServerNetworkRules(t *testing.T) {
	d := startDaemon(t, nil, nil)
	ctx := context.Background()
	open, closed := serveOK(t), serveOK(t)
	info, err := d.unix.CreateSandbox(ctx, api.CreateSandboxRequest{Network: "filtered",
		AllowOut: []string{fmt.Sprintf("127.0.0.1:%d", open)}, DenyOut: []string{"0.0.0.0/0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.unix.DeleteSandbox(ctx, info.ID)
	connect := func(port int) string {
		cmd := fmt.Sprintf("timeout 5 bash -c 'exec 3<>/dev/tcp/10.0.2.2/%d && head -c2 <&3' 2>&1", port)
		res, err := d.unix.Exec(ctx, info.ID, api.ExecRequest{Command: cmd})
		if err != nil {
			t.Fatal(err)
		}
		return res.Stdout
	}
	if got := connect(open); got != "ok" {
		t.Errorf("allowed port said %q", got)
	}
	if got := connect(closed); !strings.Contains(got, "refused") {
		t.Errorf("denied port said %q, want connection refused", got)
	}
	_, err = d.unix.CreateSandbox(ctx, api.CreateSandboxRequest{Network: "filtered", AllowOut: []string{"10.0.0.0/40"}})
	wantCode(t, err, api.CodeInvalidConfig)
}

// serveOK serves "ok" to every connection on a port of 127.0.0.1 until
// the test ends, and returns the port.
func serveOK(t *testing.T) int {
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
			fmt.Fprint(c, "ok")
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}
