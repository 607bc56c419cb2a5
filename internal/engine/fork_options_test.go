package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
)

// TestForkSnapshotOptions: the children of a snapshot alone get the
// network, rules and lifetimes ForkSnapshot's options ask for (the
// snapshot's source had no network), and options on a fork of a live
// sandbox are refused.
func TestForkSnapshotOptions(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	open, closed := privtest.ServeOK(t), privtest.ServeOK(t)
	parent := hostSandbox(t, e)
	sh(t, parent, "", "mkdir -p /data && echo kept > /data/f")
	if _, err := e.Snapshot(ctx, parent.ID(), api.SnapshotRequest{Name: "opts"}); err != nil {
		t.Fatal(err)
	}
	o := SnapshotForkOptions{Network: NetworkFiltered, Lifetime: -1, IdleTimeout: -1,
		NetPolicy: &NetPolicy{Allow: []string{fmt.Sprintf("127.0.0.1:%d", open)}, Deny: []string{"0.0.0.0/0"}}}
	if _, err := e.ForkSnapshot(ctx, parent.ID(), api.ForkRequest{}, o); !errors.Is(err, ErrBadRequest) {
		t.Errorf("options on a fork of a live sandbox: %v, want a bad request", err)
	}
	kids, err := e.ForkSnapshot(ctx, "", api.ForkRequest{Snapshot: "opts"}, o)
	if errors.Is(err, sandbox.ErrNoForwarder) {
		privtest.Skip(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	kid := kids[0]
	closeAll(t, kid)
	if got := sh(t, kid, "", "cat /data/f"); got != "kept\n" {
		t.Errorf("the child read %q, want the snapshot's file", got)
	}
	reach := func(port int) string {
		t.Helper()
		// Bounded: a refused or dropped connection fails within 10s.
		cmd := fmt.Sprintf("timeout 10 bash -c 'exec 3<>/dev/tcp/%s/%d && head -c2 <&3' 2>&1", sandbox.HostLoopback, port)
		res, err := kid.Exec(ctx, api.ExecRequest{Command: cmd, TimeoutNs: int64(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		return res.Stdout
	}
	if got := reach(open); got != "ok" {
		t.Errorf("the allowed port said %q, want ok", got)
	}
	if got := reach(closed); got == "ok" {
		t.Errorf("the denied port answered %q", got)
	}
	if info := kid.Info(); info.LifetimeNs != 0 || info.IdleTimeoutNs != 0 {
		t.Errorf("the child's lifetime %d and idle timeout %d, want none", info.LifetimeNs, info.IdleTimeoutNs)
	}
}
