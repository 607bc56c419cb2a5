package server

import (
	"context"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/client"
	"github.com/minisandbox/msb/internal/engine"
)

// TestServerBatchCreate: a create with a count gives that many distinct,
// isolated task sandboxes as a list (a create without one still answers a
// single sandbox); a batch that does not fit the daemon's sandboxes is
// refused whole with 429 naming the limit, and leaves none behind.
func TestServerBatchCreate(t *testing.T) {
	const max = 5 // one held back for grading: 4 for agents
	d := startDaemon(t, func(c *engine.Config) { c.MaxSandboxes = max }, nil)
	ctx := context.Background()
	c := d.unix
	in := generated(t).Instances[0]
	req := api.CreateSandboxRequest{InstanceID: in.InstanceID, Labels: map[string]string{"batch": "b1"}}

	_, err := c.CreateSandboxes(ctx, max, req)
	wantCode(t, err, api.CodeQuotaExceeded)
	if e := (*client.Error)(nil); !asError(err, &e) || e.Status != 429 || !strings.Contains(err.Error(), "max sandboxes") {
		t.Fatalf("a batch over the limit: %v", err)
	}
	if n := len(d.e.Sandboxes(nil)); n != 0 {
		t.Fatalf("%d sandboxes left by a refused batch", n)
	}

	got, err := c.CreateSandboxes(ctx, 3, req)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, sb := range got {
		if sb.InstanceID != in.InstanceID || sb.Labels["batch"] != "b1" || sb.State != api.SandboxRunning {
			t.Fatalf("batch member %+v", sb)
		}
		ids[sb.ID] = true
	}
	if len(got) != 3 || len(ids) != 3 {
		t.Fatalf("a batch of 3 gave %d sandboxes, %d distinct", len(got), len(ids))
	}
	sh(t, c, got[0].ID, "echo mine > /testbed/only-first.txt")
	for _, sb := range got[1:] {
		if out := sh(t, c, sb.ID, "test -e /testbed/only-first.txt && echo seen || echo unseen"); out != "unseen\n" {
			t.Fatalf("%s sees its sibling's write: %q", sb.ID, out)
		}
	}
	list, err := c.Sandboxes(ctx, map[string]string{"batch": "b1"})
	if err != nil || len(list) != 3 {
		t.Fatalf("listed %d of the batch: %v", len(list), err)
	}

	one, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{InstanceID: in.InstanceID})
	if err != nil || one.ID == "" || ids[one.ID] {
		t.Fatalf("a single create beside the batch: %v %+v", err, one)
	}
	wantCode(t, second(c.CreateSandboxes(ctx, 1, req)), api.CodeQuotaExceeded) // 4 of 4 live
	for _, id := range append(keys(ids), one.ID) {
		if _, err := c.DeleteSandbox(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.CreateSandboxes(ctx, engine.MaxBatchCount+1, req)
	wantCode(t, err, api.CodeBadRequest)
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
