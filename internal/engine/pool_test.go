package engine

import (
	"context"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
)

// waitPool polls the snapshot pool until ok says its stats are as wanted
// (a refill runs in the background), failing after a minute.
func waitPool(t *testing.T, e *Engine, what string, ok func(PoolStats) bool) PoolStats {
	t.Helper()
	for end := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		st := e.PoolStats()
		if ok(st) {
			return st
		}
		if time.Now().After(end) {
			t.Fatalf("the snapshot pool never got %s: %+v", what, st)
		}
	}
}

// TestEnginePoolRefill: a fork of a snapshot that asks for warm children
// gets them started in the background (bounded by Config.Spares); the
// next forks take them (hits) with their own labels and state, the rest
// start anew (misses), and the pool is refilled after the burst. Spares
// are not live sandboxes, and closing the engine closes them.
func TestEnginePoolRefill(t *testing.T) {
	e := openEngine(t, "", func(c *Config) { c.Spares = 2 })
	ctx := context.Background()
	src, err := e.CreateSandbox(ctx, SandboxRequest{HostBase: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Exec(ctx, api.ExecRequest{Command: "mkdir /data && echo base > /data/state.txt"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Snapshot(ctx, src.ID(), api.SnapshotRequest{Name: "pool-snap"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.DeleteSnapshot("pool-snap") })
	src.Close()

	first, err := e.Fork(ctx, "", api.ForkRequest{Snapshot: "pool-snap", Warm: 5}) // 5: bounded to 2
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, first...)
	waitPool(t, e, "2 ready", func(st PoolStats) bool { return st.Ready == 2 && st.Making == 0 })
	if n := len(e.Sandboxes(nil)); n != 1 {
		t.Fatalf("%d live sandboxes with 2 spares ready: spares must not be live", n)
	}
	before := e.PoolStats()

	kids, err := e.Fork(ctx, "", api.ForkRequest{Snapshot: "pool-snap", Count: 3, Labels: map[string]string{"burst": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, kids...)
	st := e.PoolStats()
	if st.Hits-before.Hits != 2 || st.Misses-before.Misses != 1 {
		t.Fatalf("a burst of 3 over 2 spares: %+v then %+v", before, st)
	}
	ids := map[string]bool{}
	for _, k := range kids {
		ids[k.ID()] = true
		info := k.Info()
		if info.Labels["burst"] != "1" || info.State != api.SandboxRunning {
			t.Fatalf("child %+v", info)
		}
		res, err := k.Exec(ctx, api.ExecRequest{Command: "cat /data/state.txt; echo " + k.ID() + " > /data/mine.txt"})
		if err != nil || res.Stdout != "base\n" {
			t.Fatalf("child %s: %v %+v", k.ID(), err, res)
		}
	}
	if len(ids) != 3 || len(e.Sandboxes(map[string]string{"burst": "1"})) != 3 {
		t.Fatalf("%d distinct children listed", len(ids))
	}
	waitPool(t, e, "a refill after the burst", func(st PoolStats) bool {
		return st.Ready == 2 && st.Making == 0 && st.Refills >= before.Refills+1
	})
	if st := e.PoolStats(); st.RefillTime <= 0 || st.Made < 4 {
		t.Fatalf("refill stats %+v", st)
	}
	// Deleting the snapshot closes its spares and gives their room back.
	if err := e.DeleteSnapshot("pool-snap"); err != nil {
		t.Fatal(err)
	}
	if st := e.PoolStats(); st.Ready != 0 || st.Making != 0 {
		t.Fatalf("spares of a deleted snapshot: %+v", st)
	}
	if q, live := e.Quota().Sandboxes, len(e.Sandboxes(nil)); q != live {
		t.Fatalf("%d sandboxes admitted, %d live: the spares kept their room", q, live)
	}
}
