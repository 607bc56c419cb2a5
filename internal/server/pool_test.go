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
	waitMetrics(t, d, `msb_pool_spares{kind="snapshot",state="ready"} 2`, `msb_pool_total{event="miss",kind="snapshot"} 1`,
		`msb_pool_refill_seconds_count{kind="snapshot"} 1`)
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
	waitMetrics(t, d, `msb_pool_total{event="hit",kind="snapshot"} 2`, `msb_pool_total{event="miss",kind="snapshot"} 2`,
		`msb_pool_spares{kind="snapshot",state="ready"} 2`, `msb_pool_total{event="made",kind="snapshot"} 4`, `msb_pool_refill_seconds_count{kind="snapshot"} 2`)
	for id := range ids {
		if _, err := c.DeleteSandbox(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServerImagePool: a create on an image with warm keeps that many
// sandboxes of the image started ahead; a batch create of the same image
// and shape takes them (hits), each fresh, with the image's workdir and
// the request's env, its first session the spare's shell started ahead;
// another env is another key (a miss). The metrics name the kind.
func TestServerImagePool(t *testing.T) {
	d := startDaemon(t, func(c *engine.Config) { c.Spares = 2 }, nil)
	ctx := context.Background()
	c := d.unix
	importTestImage(t, d, "example.com/test/pool:1", "")
	req := api.CreateSandboxRequest{Image: "example.com/test/pool:1", Env: []string{"IMG_VAR=given"}, Warm: 2}
	first, err := c.CreateSandbox(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{first.ID}
	defer func() {
		for _, id := range ids {
			c.DeleteSandbox(context.Background(), id)
		}
	}()
	sh(t, c, first.ID, "echo dirty > /work/LEFT")
	waitMetrics(t, d, `msb_pool_spares{kind="image",state="ready"} 2`, `msb_pool_total{event="miss",kind="image"} 1`)
	req.Warm = 0
	list, err := c.CreateSandboxes(ctx, 2, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		ids = append(ids, s.ID)
		if err := c.OpenSession(ctx, s.ID, api.SessionRequest{Name: "main"}); err != nil {
			t.Fatal(err)
		}
		res, err := c.Exec(ctx, s.ID, api.ExecRequest{Session: "main", Command: `echo "$PWD|$IMG_VAR|$([ -e /work/LEFT ] && echo left)"`})
		if err != nil || res.Stdout != "/work|given|\n" {
			t.Fatalf("a sandbox taken from the pool: %v %+v", err, res)
		}
	}
	waitMetrics(t, d, `msb_pool_total{event="hit",kind="image"} 2`, `msb_pool_sessions_total 2`)
	other, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Image: "example.com/test/pool:1", Env: []string{"IMG_VAR=other"}})
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, other.ID)
	if got := sh(t, c, other.ID, `echo "$IMG_VAR"`); got != "other\n" {
		t.Fatalf("another env: %q", got)
	}
	waitMetrics(t, d, `msb_pool_total{event="miss",kind="image"} 2`, `msb_pool_total{event="hit",kind="image"} 2`)
}
