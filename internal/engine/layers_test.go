package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/envcache"
)

// TestEngineInstanceLayers: an instance's layers are absent from an empty
// cache, named by the refs a peer would serve them under, and present once
// a sandbox of the instance built them; nothing is built by asking.
func TestEngineInstanceLayers(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, "", func(c *Config) { c.Cache.Dir = dir })
	ctx := context.Background()
	inst := generated(t).Instances[0]
	before, err := e.InstanceLayers(ctx, inst.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	if before.Present || len(before.Layers) != 2 {
		t.Fatalf("empty cache: %+v", before)
	}
	if !strings.HasPrefix(before.Layers[0].Ref, "env/") || before.Layers[1].Ref != envcache.RepoRef(inst.Repo, inst.BaseCommit) {
		t.Fatalf("refs: %+v", before.Layers)
	}
	for _, l := range before.Layers {
		if l.Present || l.Layer != "" {
			t.Fatalf("asking built %s: %+v", l.Ref, l)
		}
	}
	sb, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: inst.InstanceID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.CloseSandbox(sb.ID()); err != nil {
		t.Fatal(err)
	}
	after, err := e.InstanceLayers(ctx, inst.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	if !after.Present || after.Layers[0].Ref != before.Layers[0].Ref || !strings.HasPrefix(after.Layers[1].Layer, "sha256:") {
		t.Fatalf("after a sandbox: %+v", after)
	}
	if _, err := e.InstanceLayers(ctx, "no-such-instance"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown instance: %v", err)
	}

	// Removing its repository ref: a pattern that matches nothing removes
	// nothing; the layer is made again at the next use.
	c := e.Cache()
	if _, err := c.RemoveRefs([]string{"repo/" + inst.Repo + "@*", "repo/no/such@*"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a pattern matching nothing: %v", err)
	}
	if _, err := c.RemoveRefs([]string{"repo/["}); err == nil {
		t.Fatal("a malformed pattern was taken")
	}
	removed, err := c.RemoveRefs([]string{"repo/" + inst.Repo + "@*"})
	if err != nil || len(removed) != 1 || removed[0].Ref != after.Layers[1].Ref || removed[0].Layer != after.Layers[1].Layer {
		t.Fatalf("removed %+v, %v; want the repository ref %+v", removed, err, after.Layers[1])
	}
	gone, err := e.InstanceLayers(ctx, inst.InstanceID)
	if err != nil || gone.Present || !gone.Layers[0].Present || gone.Layers[1].Present {
		t.Fatalf("after rm: %+v %v; want the environment kept, the repository gone", gone, err)
	}
	sb, err = e.CreateSandbox(ctx, SandboxRequest{InstanceID: inst.InstanceID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.CloseSandbox(sb.ID()); err != nil {
		t.Fatal(err)
	}
	if again, err := e.InstanceLayers(ctx, inst.InstanceID); err != nil || !again.Present {
		t.Fatalf("the next sandbox did not make the layer again: %+v %v", again, err)
	}
}
