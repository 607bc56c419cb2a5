package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
)

// scrape is the daemon's /metrics.
func scrape(t *testing.T, d *daemon) string {
	t.Helper()
	st, b := raw(t, http.DefaultClient, "GET", d.tcp+"/metrics", testToken, "")
	if st != 200 {
		t.Fatalf("/metrics: %d %s", st, b)
	}
	return string(b)
}

// waitMetrics scrapes until every line of want is in the metrics (the
// pool refills in the background), failing after a minute.
func waitMetrics(t *testing.T, d *daemon, want ...string) {
	t.Helper()
	for end := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		m, missing := scrape(t, d), ""
		for _, w := range want {
			if !strings.Contains(m, w+"\n") {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("metrics never showed %q:\n%s", missing, m)
		}
	}
}

// TestServerSnapshotPool: a fork of a named snapshot with warm keeps that
// many children ready (bounded by --spares); a burst of forks takes them
// (hits, then a miss past them), each child distinct and with the
// snapshot's state, and the metrics show the pool refilled after it.
func TestServerSnapshotPool(t *testing.T) {
	d := startDaemon(t, func(c *engine.Config) { c.Spares = 2 }, nil)
	ctx := context.Background()
	c := d.unix
	src, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{HostBase: true})
	if err != nil {
		t.Fatal(err)
	}
	sh(t, c, src.ID, "mkdir /data && echo base > /data/state.txt")
	if _, err := c.Snapshot(ctx, src.ID, api.SnapshotRequest{Name: "srv-pool"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteSnapshot(context.Background(), "srv-pool") })
	if _, err := c.DeleteSandbox(ctx, src.ID); err != nil {
		t.Fatal(err)
	}

	first, err := c.ForkSnapshot(ctx, "srv-pool", api.ForkRequest{Warm: 9})
	if err != nil || len(first) != 1 {
		t.Fatalf("fork asking for warm children: %v %+v", err, first)
	}
	waitMetrics(t, d, `msb_snapshot_pool{state="ready"} 2`, `msb_snapshot_pool_total{event="miss"} 1`,
		`msb_snapshot_pool_refill_seconds_count 1`)
	if list, err := c.Sandboxes(ctx, nil); err != nil || len(list) != 1 {
		t.Fatalf("warm children are listed: %v %+v", err, list)
	}

	kids, err := c.ForkSnapshot(ctx, "srv-pool", api.ForkRequest{Count: 3, Labels: map[string]string{"burst": "1"}})
	if err != nil || len(kids) != 3 {
		t.Fatalf("a burst of 3: %v %+v", err, kids)
	}
	ids := map[string]bool{first[0].ID: true}
	for _, k := range kids {
		ids[k.ID] = true
		if k.Labels["burst"] != "1" || sh(t, c, k.ID, "cat /data/state.txt") != "base\n" {
			t.Fatalf("child %+v", k)
		}
	}
	if len(ids) != 4 {
		t.Fatalf("%d distinct sandboxes of 4", len(ids))
	}
	waitMetrics(t, d, `msb_snapshot_pool_total{event="hit"} 2`, `msb_snapshot_pool_total{event="miss"} 2`,
		`msb_snapshot_pool{state="ready"} 2`, `msb_snapshot_pool_total{event="made"} 4`, `msb_snapshot_pool_refill_seconds_count 2`)
	for id := range ids {
		if _, err := c.DeleteSandbox(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}
