package server

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
)

// TestServerCompactionMetrics: a daemon compacting on its own
// (engine.Config.CompactUnused) makes an unused snapshot's layers cold,
// and /metrics counts the runs, the layers, the object and its bytes.
func TestServerCompactionMetrics(t *testing.T) {
	d := startDaemon(t, func(c *engine.Config) {
		c.Cache.Dir, c.CompactUnused, c.CompactEvery = t.TempDir(), time.Nanosecond, 100*time.Millisecond
	}, nil)
	ctx := context.Background()
	c := d.unix
	src, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{HostBase: true})
	if err != nil {
		t.Fatal(err)
	}
	sh(t, c, src.ID, "mkdir /data && seq 1 100000 > /data/big.txt")
	if _, err := c.Snapshot(ctx, src.ID, api.SnapshotRequest{Name: "srv-compact"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteSnapshot(context.Background(), "srv-compact") })
	if _, err := c.DeleteSandbox(ctx, src.ID); err != nil {
		t.Fatal(err)
	}
	waitMetrics(t, d, `msb_cache_compacted_objects_total 1`,
		`msb_cache_compaction_runs_total{outcome="failed"} 0`)
	m := scrape(t, d)
	for _, re := range []string{`msb_cache_compaction_runs_total\{outcome="ok"\} [1-9]`, `msb_cache_compacted_layers_total [1-9]`,
		`msb_cache_compacted_bytes_total\{kind="freed"\} [1-9]`,
		`msb_cache_compacted_bytes_total\{kind="raw"\} [1-9]`, `msb_cache_compaction_last_seconds [0-9]`} {
		if !regexp.MustCompile(re).MatchString(m) {
			t.Errorf("metrics lack %s:\n%s", re, m)
		}
	}
}
