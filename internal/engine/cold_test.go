package engine

import (
	"context"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/store"
)

// viewCommand prints a digest of every path under the environment and the
// repository (name, mode, owner, size, link target) and of every file's
// content, mounts below them left out.
const viewCommand = `set -o pipefail; for d in /opt/msb /testbed; do find "$d" -xdev -printf '%p %m %U %G %s %l\n' | sort; find "$d" -xdev -type f -print0 | sort -z | xargs -0 -r sha256sum; done | sha256sum; find /opt/msb /testbed -xdev -type f | wc -l`

// TestEngineCompactedLayers: a task sandbox on layers msb cache compact
// made cold (trees removed, objects compressed) sees the files it saw on
// them warm, and thaws them once. TestRootless reruns it unprivileged.
func TestEngineCompactedLayers(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, "", func(c *Config) { c.Cache.Dir = dir })
	ctx := context.Background()
	inst := generated(t).Instances[0]
	look := func() string {
		t.Helper()
		sb, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: inst.InstanceID})
		if err != nil {
			t.Fatal(err)
		}
		defer e.CloseSandbox(sb.ID())
		res, err := sb.Exec(ctx, api.ExecRequest{Command: viewCommand})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("view: %v %+v", err, res)
		}
		return res.Stdout
	}
	warm := look()
	c := e.Cache()
	r, err := c.Compact(ctx, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := e.InstanceLayers(ctx, inst.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	cold := map[string]bool{}
	for _, l := range r.Layers {
		cold[l] = true
	}
	for _, l := range layers.Layers {
		if !l.Present || !cold[l.Layer] {
			t.Fatalf("layer %s (%s) not compacted: %+v (compacted %v)", l.Ref, l.Layer, l, r.Layers)
		}
	}
	if r.Objects == 0 || r.Leased != 0 {
		t.Fatalf("compact report %+v: want objects compressed, none leased", r)
	}
	u, err := c.Usage(ctx)
	if err != nil || u.Compacted < len(layers.Layers) || u.Compressed == 0 {
		t.Fatalf("usage after compact: %+v %v", u, err)
	}
	if got := look(); got != warm {
		t.Fatalf("on cold layers the sandbox sees\n%s\nwarm it saw\n%s", got, warm)
	}
	for _, l := range layers.Layers {
		id, err := store.ParseLayerID(l.Layer)
		if err != nil || c.st().Compacted(id) || !c.st().Has(id) {
			t.Fatalf("layer %s after a sandbox on it: compacted %v (%v)", l.Ref, c.st().Compacted(id), err)
		}
	}
	if rep, err := c.Verify(ctx); err != nil || !rep.OK {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	t.Logf("%d layers, %d objects compressed (%d -> %d bytes); view %s", len(r.Layers), r.Objects, r.RawBytes, r.CompressedBytes, warm)
}
