package rootfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/store"
)

// commitFile commits a layer holding one file over parents (topmost
// first).
func commitFile(t *testing.T, st *store.Store, name, body string, parents ...store.LayerID) store.LayerID {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	id, err := st.CommitDir(context.Background(), dir, store.CommitOptions{Parents: parents})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestSnapshotSource: Resolve of snapshot/<name> is the snapshot, whose
// root is its record's base with the data layer on top (not the record
// layer the ref points at) and its sandbox's defaults (its user as an
// image's USER, "uid:gid"; root's as none); it lists and
// deletes by name, and an unknown or impossible name is ErrNoSnapshot.
func TestSnapshotSource(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	base := commitFile(t, st, "base.txt", "base")
	data := commitFile(t, st, "data.txt", "data", base)
	rec := SnapshotRecord{SnapshotInfo: api.SnapshotInfo{Name: "s1", Layer: data.String()}, Base: []store.LayerID{base},
		Workdir: "/work", Env: []string{"A=1"}, User: SnapshotUser{UID: 1000, GID: 1001}}
	if err := WriteSnapshot(ctx, st, rec); err != nil {
		t.Fatal(err)
	}
	src := Resolve(st, "snapshot/s1")
	if src != (Snapshot{Name: "s1"}) || src.String() != "snapshot/s1" {
		t.Fatalf("Resolve: %#v", src)
	}
	root, err := src.Root(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if root.HostBase || !slices.Equal(root.Layers, []store.LayerID{base, data}) || root.Config.WorkingDir != "/work" || !slices.Equal(root.Config.Env, []string{"A=1"}) ||
		root.Config.User != "1000:1001" {
		t.Fatalf("root %+v", root)
	}
	if u := (SnapshotUser{}).Image(); u != "" {
		t.Fatalf("root's user as an image's USER: %q, want none", u)
	}
	got, err := Snapshot{Name: "s1"}.Record(ctx, st)
	if err != nil || got.Layer != data.String() || got.Sessions == nil {
		t.Fatalf("record %+v: %v", got, err)
	}
	if names, err := SnapshotNames(st); err != nil || !slices.Equal(names, []string{"s1"}) {
		t.Fatalf("names %v: %v", names, err)
	}
	if err := DeleteSnapshot(st, "s1"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"s1", "../x", ""} {
		if _, err := (Snapshot{Name: name}).Root(ctx, st); !errors.Is(err, ErrNoSnapshot) {
			t.Errorf("root of %q: %v", name, err)
		}
		if err := DeleteSnapshot(st, name); !errors.Is(err, ErrNoSnapshot) {
			t.Errorf("deleting %q: %v", name, err)
		}
	}
}

// TestSnapshotImage: where a snapshot's root splits its shifted layers
// (Root.Image): the image's own layers its record names, else all of its
// Base (a record written before it kept them, a sandbox with no image
// below other layers), never the data layer; none without a Base.
func TestSnapshotImage(t *testing.T) {
	base := make([]store.LayerID, 3)
	for _, c := range []struct {
		rec  SnapshotRecord
		want int
	}{
		{SnapshotRecord{Base: base, ImageLayers: 2}, 2},
		{SnapshotRecord{Base: base, ImageLayers: 3}, 3},
		{SnapshotRecord{Base: base}, 3},
		{SnapshotRecord{Base: base, ImageLayers: 4}, 3},
		{SnapshotRecord{HostBase: true}, 0},
	} {
		if got := c.rec.Image(); got != c.want {
			t.Errorf("record of %d base layers, image_layers %d: %d, want %d", len(c.rec.Base), c.rec.ImageLayers, got, c.want)
		}
	}
}
