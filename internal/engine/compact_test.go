package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/store"
)

// TestEngineCompactDaemon: an engine with Config.CompactUnused compacts
// on its own a layer nobody uses (a snapshot's) and leaves those a
// running sandbox uses; a sandbox on the compacted layer afterwards sees
// its files (thawed); Close stops a compaction under way, leaving a store
// that verifies and whose layers a new engine starts sandboxes on.
// TestRootless reruns it unprivileged.
func TestEngineCompactDaemon(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	inst := generated(t).Instances[0].InstanceID
	const big = "seq 1 200000 > /testbed/BIG.txt" // 1.2 MB, compressible
	const look = "wc -c < /testbed/BIG.txt; tail -n 1 /testbed/BIG.txt"

	// The cache built, and a snapshot's layer, by an engine that does not
	// compact.
	e0 := openEngine(t, "", func(c *Config) { c.Cache.Dir = dir })
	s, err := e0.CreateSandbox(ctx, SandboxRequest{InstanceID: inst})
	if err != nil {
		t.Fatal(err)
	}
	sh(t, s, "", big)
	info, err := e0.Snapshot(ctx, s.ID(), api.SnapshotRequest{Name: "cold"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := e0.Close(); err != nil {
		t.Fatal(err)
	}
	snap, err := store.ParseLayerID(info.Layer)
	if err != nil {
		t.Fatal(err)
	}

	e := openEngine(t, "", func(c *Config) {
		c.Cache.Dir, c.CompactUnused, c.CompactEvery = dir, time.Nanosecond, 300*time.Millisecond
	})
	st := e.Cache().st()
	keep, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: inst})
	if err != nil {
		t.Fatal(err)
	}
	// Two runs ended: the last began after keep leased its layers.
	n0 := e.CompactionStats()
	waitCompaction(t, e, func(c CompactionStats) bool { return c.Runs >= n0.Runs+2 })
	c := e.CompactionStats()
	if c.Errors != 0 || c.Layers == 0 || c.Objects == 0 || c.FreedBytes <= 0 || !st.Compacted(snap) {
		t.Fatalf("compaction stats %+v (snapshot layer compacted: %v): want the snapshot's layer and its objects compacted",
			c, st.Compacted(snap))
	}
	used, err := e.InstanceLayers(ctx, inst)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range used.Layers {
		id, _ := store.ParseLayerID(l.Layer)
		if st.Compacted(id) || slices.Contains(c.LastLayers, id) {
			t.Fatalf("layer %s (%s), which a running sandbox uses, was compacted (last run: %v)", l.Ref, l.Layer, c.LastLayers)
		}
	}
	if got := sh(t, keep, "", "cat /testbed/BIG.txt 2>/dev/null | wc -c"); got != "0\n" {
		t.Fatalf("the running sandbox sees BIG.txt: %q", got)
	}

	// A sandbox on the compacted layer thaws it.
	kids, err := e.Fork(ctx, "", api.ForkRequest{Snapshot: "cold"})
	if err != nil {
		t.Fatal(err)
	}
	if got := sh(t, kids[0], "", look); got != "1288895\n200000\n" {
		t.Fatalf("a sandbox on the compacted snapshot reads %q", got)
	}
	kids[0].Close()
	keep.Close()

	// Nothing is used now: the next run compacts every layer; Close
	// stops it mid-way.
	began := e.CompactionStats().Started
	waitCompaction(t, e, func(c CompactionStats) bool { return c.Running && c.Started > began })
	t0 := time.Now()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	c = e.CompactionStats()
	t.Logf("close took %v during a compaction; stats %+v", time.Since(t0), c)
	if c.Cancelled == 0 || c.Errors != 0 || c.Running {
		t.Fatalf("compaction stats after Close %+v: want the run under way cancelled", c)
	}
	reopened, err := store.Open(st.Root())
	if err != nil {
		t.Fatal(err)
	}
	if r, err := reopened.Verify(ctx); err != nil || !r.OK() {
		t.Fatalf("verify after a compaction stopped by Close: %+v %v", r, err)
	}
	e2 := openEngine(t, "", func(c *Config) { c.Cache.Dir = dir })
	s2, err := e2.Fork(ctx, "", api.ForkRequest{Snapshot: "cold"})
	if err != nil {
		t.Fatal(err)
	}
	defer s2[0].Close()
	if got := sh(t, s2[0], "", look); got != "1288895\n200000\n" {
		t.Fatalf("after the stopped compaction a sandbox on the snapshot reads %q", got)
	}
}

// waitCompaction waits (up to two minutes) until the engine's compaction
// stats satisfy ok.
func waitCompaction(t *testing.T, e *Engine, ok func(CompactionStats) bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !ok(e.CompactionStats()) {
		if time.Now().After(deadline) {
			t.Fatalf("compaction stats %+v: not there after two minutes", e.CompactionStats())
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkCreateDuringCompaction: how long a task sandbox's create takes
// while a background compaction (CompactOptions.Background, as the
// daemon's) compresses a large unused layer, against the same creates
// with none running, interleaved round by round. A sandbox kept open
// holds the instance's layers, so that the compaction takes only the
// snapshot's layer (~340 MB of text in 400 files), thawed again before
// each round. Reports the medians and the slowest create of each.
func BenchmarkCreateDuringCompaction(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	inst := generated(b).Instances[0].InstanceID
	e := openEngine(b, "", func(c *Config) { c.Cache.Dir = dir })
	s, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: inst})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	res, err := s.Exec(ctx, api.ExecRequest{Command: "mkdir /testbed/big && cd /testbed/big && for i in $(seq 1 400); do seq $((i*100000)) $((i*100000+120000)) > f$i; done",
		TimeoutNs: int64(10 * time.Minute)})
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("writing the big files: %v %+v", err, res)
	}
	info, err := e.Snapshot(ctx, s.ID(), api.SnapshotRequest{Name: "big"})
	if err != nil {
		b.Fatal(err)
	}
	e.waitSnapshots() // its layer published
	snap, _ := store.ParseLayerID(info.Layer)
	st := e.Cache().st()
	create := func() time.Duration {
		t0 := time.Now()
		sb, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: inst})
		took := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		sb.Close()
		return took
	}
	var idle, during []time.Duration
	var compactTook []time.Duration
	b.ResetTimer()
	for range b.N {
		if _, err := st.Materialize(ctx, snap); err != nil {
			b.Fatal(err)
		}
		done := make(chan store.CompactReport, 1)
		t0 := time.Now()
		go func() {
			r, err := st.Compact(ctx, store.CompactOptions{UnusedFor: -1, Layers: []store.LayerID{snap}, Background: true})
			if err != nil {
				b.Error(err)
			}
			done <- r
		}()
		for running := true; running; {
			select {
			case r := <-done:
				compactTook = append(compactTook, time.Since(t0))
				if r.Objects == 0 {
					b.Fatalf("compaction %+v compressed nothing", r)
				}
				running = false
			default:
				during = append(during, create())
			}
		}
		for range 10 {
			idle = append(idle, create())
		}
	}
	b.StopTimer()
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	b.ReportMetric(med(idle), "idle-p50-ms")
	b.ReportMetric(float64(slices.Max(idle).Microseconds())/1000, "idle-max-ms")
	b.ReportMetric(med(during), "during-p50-ms")
	b.ReportMetric(float64(slices.Max(during).Microseconds())/1000, "during-max-ms")
	b.ReportMetric(med(compactTook), "compact-ms")
	b.ReportMetric(float64(len(during)), "creates-during")
	b.ReportMetric(0, "ns/op")
}
