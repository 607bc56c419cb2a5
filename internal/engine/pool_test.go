package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/warm"
)

// waitPool polls the warm pool's stats of kind until ok says they are as
// wanted (a refill runs in the background), failing after a minute.
func waitPool(t *testing.T, e *Engine, kind, what string, ok func(warm.Stats) bool) warm.Stats {
	t.Helper()
	for end := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		st := e.PoolStats()[kind]
		if ok(st) {
			return st
		}
		if time.Now().After(end) {
			t.Fatalf("the %s pool never got %s: %+v", kind, what, st)
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
	waitPool(t, e, PoolSnapshot, "2 ready", func(st warm.Stats) bool { return st.Spares == 2 && st.Making == 0 })
	if n := len(e.Sandboxes(nil)); n != 1 {
		t.Fatalf("%d live sandboxes with 2 spares ready: spares must not be live", n)
	}
	before := e.PoolStats()[PoolSnapshot]

	kids, err := e.Fork(ctx, "", api.ForkRequest{Snapshot: "pool-snap", Count: 3, Labels: map[string]string{"burst": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, kids...)
	st := e.PoolStats()[PoolSnapshot]
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
	waitPool(t, e, PoolSnapshot, "a refill after the burst", func(st warm.Stats) bool {
		return st.Spares == 2 && st.Making == 0 && st.Refills >= before.Refills+1
	})
	if st := e.PoolStats()[PoolSnapshot]; st.RefillTime <= 0 || st.Made < 4 {
		t.Fatalf("refill stats %+v", st)
	}
	// Deleting the snapshot closes its spares and gives their room back.
	if err := e.DeleteSnapshot("pool-snap"); err != nil {
		t.Fatal(err)
	}
	if st := e.PoolStats()[PoolSnapshot]; st.Spares != 0 || st.Making != 0 {
		t.Fatalf("spares of a deleted snapshot: %+v", st)
	}
	if q, live := e.Quota().Sandboxes, len(e.Sandboxes(nil)); q != live {
		t.Fatalf("%d sandboxes admitted, %d live: the spares kept their room", q, live)
	}
}

// TestEnginePoolWarmCreate: a create's Warm sets how many spares of its
// instance the engine keeps (bounded by Config.Spares); a batch create
// takes them (hits) and starts the rest (a miss), and each sandbox taken
// is fresh, distinct and labelled as asked.
func TestEnginePoolWarmCreate(t *testing.T) {
	id := generated(t).Instances[0].InstanceID
	e := openEngine(t, "", func(c *Config) { c.Spares, c.SparesPerInstance = 3, 1 })
	ctx := context.Background()
	first, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: id, Warm: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Exec(ctx, api.ExecRequest{Command: "echo dirty > /testbed/LEFT"}); err != nil {
		t.Fatal(err)
	}
	waitPool(t, e, PoolInstance, "2 ready", func(st warm.Stats) bool { return st.Spares == 2 && st.Making == 0 })
	made, err := e.CreateSandboxes(ctx, SandboxRequest{InstanceID: id, Labels: map[string]string{"b": "1"}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, append(made, first)...)
	if st := e.PoolStats()[PoolInstance]; st.Hits != 2 || st.Misses != 2 {
		t.Fatalf("a batch of 3 over 2 spares: %+v", st)
	}
	ids := map[string]bool{}
	for _, s := range made {
		ids[s.ID()] = true
		res, err := s.Exec(ctx, api.ExecRequest{Command: "ls /testbed/LEFT 2>/dev/null | wc -l"})
		if err != nil || res.Stdout != "0\n" || s.Info().Labels["b"] != "1" {
			t.Fatalf("sandbox %s of the batch: %v %+v %+v", s.ID(), err, res, s.Info())
		}
	}
	if len(ids) != 3 {
		t.Fatalf("%d distinct sandboxes of 3", len(ids))
	}
	// The size asked for stays: the batch's creates refill to 2.
	waitPool(t, e, PoolInstance, "2 again", func(st warm.Stats) bool { return st.Spares == 2 && st.Making == 0 })
	if _, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: id, Warm: -1}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("a negative warm: %v", err)
	}
}

// TestEnginePoolQuota: spares are admitted as sandboxes and hold their
// room, so the pool never takes the engine over its quota (a refill that
// finds no room stops); and they yield to real creates: a create that
// finds no room closes a spare and gets its room, where without the
// pool it would be refused.
func TestEnginePoolQuota(t *testing.T) {
	g := generated(t)
	a, b := g.Instances[0].InstanceID, g.Instances[1].InstanceID
	e := openEngine(t, "", func(c *Config) { c.Spares, c.MaxSandboxes, c.GradingReserve = 3, 2, -1 })
	ctx := context.Background()
	sa, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: a, Warm: 3, AdmissionWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	st := waitPool(t, e, PoolInstance, "a refill that stopped for room", func(st warm.Stats) bool { return st.Failed == 1 && st.Making == 0 })
	if st.Spares != 1 || st.Made != 1 {
		t.Fatalf("spares under max sandboxes 2 with one live: %+v", st)
	}
	if q := e.Quota(); q.Sandboxes != 2 {
		t.Fatalf("%d sandboxes admitted with one live and one spare: a spare must hold its room", q.Sandboxes)
	}
	sb, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: b, AdmissionWait: -1})
	if err != nil {
		t.Fatalf("a create with only a spare in its way: %v", err)
	}
	defer sb.Close()
	if st := e.PoolStats()[PoolInstance]; st.Shed != 1 || st.Spares != 0 {
		t.Fatalf("the spare did not yield: %+v", st)
	}
	// b's refill finds no room, and a third create is refused naming the
	// limit: the spares never hold what live sandboxes need.
	waitPool(t, e, PoolInstance, "b's refill", func(st warm.Stats) bool { return st.Failed == 2 && st.Making == 0 })
	if q := e.Quota(); q.Sandboxes != 2 || len(e.Sandboxes(nil)) != 2 {
		t.Fatalf("quota %+v with 2 live", q)
	}
	if _, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: a, AdmissionWait: -1}); !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "max sandboxes") {
		t.Fatalf("a create past the quota: %v", err)
	}
}

// TestEnginePoolRefusesBadCreate: a create the engine refuses is refused
// with a spare of its instance ready too: it is not served from the pool.
func TestEnginePoolRefusesBadCreate(t *testing.T) {
	id := generated(t).Instances[0].InstanceID
	e := openEngine(t, "", func(c *Config) { c.Spares = 1 })
	ctx := context.Background()
	first, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: id})
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	waitPool(t, e, PoolInstance, "a spare", func(st warm.Stats) bool { return st.Spares == 1 && st.Making == 0 })
	for _, req := range []SandboxRequest{{InstanceID: id, Workdir: "/tmp"}, {InstanceID: id, Env: []string{"A=1"}}, {InstanceID: id, HostBase: true}} {
		if s, err := e.CreateSandbox(ctx, req); !errors.Is(err, ErrBadRequest) {
			if s != nil {
				s.Close()
			}
			t.Fatalf("%+v: %v", req, err)
		}
	}
	if st := e.PoolStats()[PoolInstance]; st.Spares != 1 || st.Hits != 0 {
		t.Fatalf("a refused create touched the pool: %+v", st)
	}
}
