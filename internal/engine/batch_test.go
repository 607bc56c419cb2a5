package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestEngineBatchCreate: CreateSandboxes gives count distinct live
// sandboxes; a batch past the quota fails with ErrQuota naming the limit,
// leaves none and gives its room back, and a count out of range is a bad
// request.
func TestEngineBatchCreate(t *testing.T) {
	e := openEngine(t, "", func(c *Config) { c.MaxSandboxes, c.GradingReserve = 3, -1 })
	ctx := context.Background()
	req := SandboxRequest{HostBase: true, Labels: map[string]string{"b": "1"}, AdmissionWait: -1}
	if _, err := e.CreateSandboxes(ctx, req, 4); !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "max sandboxes") {
		t.Fatalf("a batch of 4 under a limit of 3: %v", err)
	}
	if n := len(e.Sandboxes(nil)); n != 0 {
		t.Fatalf("%d sandboxes after a refused batch", n)
	}
	made, err := e.CreateSandboxes(ctx, req, 3)
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, made...)
	ids := map[string]bool{}
	for _, s := range made {
		ids[s.ID()] = true
	}
	if len(made) != 3 || len(ids) != 3 || len(e.Sandboxes(map[string]string{"b": "1"})) != 3 {
		t.Fatalf("a batch of 3 gave %d sandboxes, %d distinct", len(made), len(ids))
	}
	for _, n := range []int{0, -1, MaxBatchCount + 1} {
		if _, err := e.CreateSandboxes(ctx, req, n); !errors.Is(err, ErrBadRequest) {
			t.Errorf("a batch of %d: %v", n, err)
		}
	}
}
