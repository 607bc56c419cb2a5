package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/privtest"
)

// TestServerNetworkRules: allow_out and deny_out of a create hold in the
// sandbox, with listeners on the host's 127.0.0.1 as the only targets,
// and a bad entry is invalid_config.
func TestServerNetworkRules(t *testing.T) {
	d := startDaemon(t, nil, nil)
	ctx := context.Background()
	open, closed := privtest.ServeOK(t), privtest.ServeOK(t)
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
