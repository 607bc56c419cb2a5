package envcache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/store"
)

// commitFile commits a layer of one file, name holding content, over
// parents.
func commitFile(t *testing.T, c *Cache, name, content string, parents ...store.LayerID) store.LayerID {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	id, err := c.store.CommitDir(t.Context(), dir, store.CommitOptions{Parents: parents})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestSnapshotBase: a snapshot (snapshot/<name>) is a base like any
// other: environments build on its data layer and the layers below it;
// a snapshot of a sandbox on the host's directories is refused with
// ErrBadBase (builds run on the host or on layers, not both).
func TestSnapshotBase(t *testing.T) {
	ctx := context.Background()
	c, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	base := commitFile(t, c, "f", "base")
	data := commitFile(t, c, "f", "data", base)
	onHost := commitFile(t, c, "f", "on the host")
	for _, rec := range []rootfs.SnapshotRecord{
		{SnapshotInfo: api.SnapshotInfo{Name: "layers", Layer: data.String()}, Base: []store.LayerID{base}},
		{SnapshotInfo: api.SnapshotInfo{Name: "host", Layer: onHost.String()}, HostBase: true},
	} {
		if err := rootfs.WriteSnapshot(ctx, c.store, rec); err != nil {
			t.Fatal(err)
		}
	}
	c.opts.Base = "snapshot/layers"
	b, err := c.base(ctx)
	if err != nil || b.host || b.layer != data || !slices.Equal(b.stack, []store.LayerID{data, base}) {
		t.Fatalf("base %+v: %v", b, err)
	}
	if b, err := c.resolveBase(ctx, "snapshot/layers"); err != nil || b.layer != data {
		t.Fatalf("spec base %+v: %v", b, err)
	}
	c.opts.Base = "snapshot/host"
	if _, err := c.base(ctx); !errors.Is(err, ErrBadBase) {
		t.Fatalf("base on the host: %v", err)
	}
	if _, err := c.resolveBase(ctx, "snapshot/host"); !errors.Is(err, ErrBadBase) {
		t.Fatalf("spec base on the host: %v", err)
	}
}
