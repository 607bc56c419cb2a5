package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/sandbox"
)

// TestEngineEvaluateTakesSandboxLimits: a sandbox's evaluation grades in a
// sandbox of that sandbox's limits, not the daemon's defaults. Admitted by
// whole limits in a budget of 1.5 GiB, a sandbox of 512 MiB and its grader
// of 512 MiB fit; a grader of the default 4 GiB would not (before, evaluate
// was refused at once as too large).
func TestEngineEvaluateTakesSandboxLimits(t *testing.T) {
	id := generated(t).Instances[0].InstanceID
	e := openEngine(t, "", func(c *Config) { c.MemoryBudget, c.MemoryReserve, c.GradingReserve = 3<<29, -1, -1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: id, Limits: api.Limits{MemoryBytes: 512 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, _, err := s.Evaluate(ctx, "agent")
	if err != nil || res.Outcome != api.OutcomeEmptyPatch {
		t.Fatalf("grading a sandbox of 512 MiB beside it in a budget of 1.5 GiB: %v %q", err, res.Outcome)
	}
	if q := e.Quota(); q.MemoryUsedBytes != 512<<20 {
		t.Fatalf("after the evaluation %d MiB are reserved, want the sandbox's 512", q.MemoryUsedBytes>>20)
	}
}

// TestEngineDefaultMemoryFitsHundreds: with the default limits, admission
// counts DefaultMemoryReserve of each sandbox, so a host of 128 GiB holds
// 256 of them (counting the 4 GiB limits, 32); a sandbox's limit stays its
// ceiling, and one above the whole budget is still refused.
func TestEngineDefaultMemoryFitsHundreds(t *testing.T) {
	e := openEngine(t, "", func(c *Config) { c.MemoryBudget = 128 << 30 })
	if n := e.Concurrency(api.Limits{}); n != 256 {
		t.Fatalf("sandboxes of the default limits in 128 GiB: %d, want 256", n)
	}
	ctx := context.Background()
	s, err := e.CreateSandbox(ctx, SandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Info().Limits.MemoryBytes; got != sandbox.DefaultLimits.MemoryBytes {
		t.Fatalf("the sandbox's memory limit is %d, want the default %d", got, sandbox.DefaultLimits.MemoryBytes)
	}
	if q := e.Quota(); q.MemoryUsedBytes != DefaultMemoryReserve {
		t.Fatalf("a sandbox of the default limits reserves %d MiB, want %d", q.MemoryUsedBytes>>20, DefaultMemoryReserve>>20)
	}
	if _, err := e.CreateSandbox(ctx, SandboxRequest{Limits: api.Limits{MemoryBytes: 129 << 30}}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a memory limit above the whole budget: %v, want ErrTooLarge", err)
	}
}

func TestMemReserve(t *testing.T) {
	const mi = 1 << 20
	for _, tc := range []struct {
		name    string
		reserve int64
		limit   int64
		want    int64
	}{
		{"default limit, default reserve", 0, 0, DefaultMemoryReserve},
		{"small limit", 0, 256 * mi, 256 * mi},
		{"whole limits", -1, 0, sandbox.DefaultLimits.MemoryBytes},
		{"own reserve", 1 << 30, 2 << 30, 1 << 30},
	} {
		c := Config{MemoryReserve: tc.reserve}
		if got := c.memReserve(sandbox.Limits{MemoryBytes: tc.limit}); got != tc.want {
			t.Errorf("%s: %d MiB, want %d", tc.name, got/mi, tc.want/mi)
		}
	}
}
