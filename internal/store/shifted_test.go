package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestShifted: a shifted tree is built once per key (a failed build leaves
// nothing), is counted by Usage apart from the layers, and GC keeps it
// while all its layers live (a ref, a lease) and removes it with the first
// of them, saying how many bytes it freed, and removes a half-built one.
func TestShifted(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	base := commitNodes(t, s, map[string]node{"a": {content: "a"}}, CommitOptions{Ref: "env/base"})
	top := commitNodes(t, s, map[string]node{"b": {content: "b"}}, CommitOptions{Parents: []LayerID{base}})
	builds := 0
	build := func(ctx context.Context, tree string) error {
		builds++
		return os.WriteFile(filepath.Join(tree, "owned"), make([]byte, 64<<10), 0o644)
	}
	if _, err := s.Shifted(ctx, "bad", []LayerID{base}, func(context.Context, string) error { return errors.New("no maps") }); err == nil {
		t.Fatal("a failed build gave a tree")
	}
	one, err := s.Shifted(ctx, "one", []LayerID{base}, build)
	if err != nil {
		t.Fatal(err)
	}
	two, err := s.Shifted(ctx, "two", []LayerID{base, top}, build)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := s.Shifted(ctx, "one", []LayerID{base}, build); err != nil || again != one || builds != 2 {
		t.Fatalf("second use: %q %v, %d builds", again, err, builds)
	}
	if _, ok := s.TreeLayer(one); ok {
		t.Fatal("a shifted tree taken for a layer")
	}
	u0, err := s.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if u0.Shifted != 2 || u0.ShiftedBytes < 2*64<<10 || u0.ShiftedBytes > u0.DiskBytes-u0.TreeBytes {
		t.Fatalf("usage: %d shifted trees of %d bytes, disk %d, layers' files %d: want 2 trees of at least 128 KiB, apart from the layers'",
			u0.Shifted, u0.ShiftedBytes, u0.DiskBytes, u0.TreeBytes)
	}
	os.MkdirAll(filepath.Join(s.Root(), "shifted", ".tmp-stale-1"), 0o755)
	lease, err := s.Lease(ctx, top)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.GC(ctx)
	if err != nil || r.Shifted != 0 || r.Temp == 0 {
		t.Fatalf("gc with the layers kept: %+v %v", r, err)
	}
	for _, p := range []string{one, two} {
		if _, err := os.Stat(filepath.Join(p, "owned")); err != nil {
			t.Fatal(err)
		}
	}
	lease.Release()
	if r, err = s.GC(ctx); err != nil || r.Shifted != 1 || r.ShiftedBytes < 64<<10 || r.ShiftedBytes > u0.ShiftedBytes/2 || r.FreedBytes < r.ShiftedBytes {
		t.Fatalf("gc after the lease: %+v %v", r, err)
	}
	if u, err := s.Usage(ctx); err != nil || u.Shifted != 1 || u.ShiftedBytes != u0.ShiftedBytes-r.ShiftedBytes {
		t.Fatalf("usage after gc: %+v %v, want one tree and %d bytes", u, err, u0.ShiftedBytes-r.ShiftedBytes)
	}
	if _, err := os.Stat(two); !os.IsNotExist(err) {
		t.Fatalf("the tree of a collected layer: %v", err)
	}
	if _, err := os.Stat(one); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRef("env/base"); err != nil {
		t.Fatal(err)
	}
	if r, err = s.GC(ctx); err != nil || r.Shifted != 1 {
		t.Fatalf("gc after the ref: %+v %v", r, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Root(), "shifted")); len(ents) != 0 {
		t.Fatalf("left in shifted/: %v", ents)
	}
}

// TestShiftedVersion: Shifted writes ShiftedVersion beside the tree; GC
// removes a shifted tree of another version (session 14's have no version
// file) though its layers are kept, but while a live lease holds them all
// (an older msb's sandbox may mount it), and keeps one of this version.
func TestShiftedVersion(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	base := commitNodes(t, s, map[string]node{"a": {content: "a"}}, CommitOptions{Ref: "env/base"})
	cur, err := s.Shifted(ctx, "cur", []LayerID{base}, func(ctx context.Context, tree string) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(cur), "version")); err != nil || string(b) != ShiftedVersion+"\n" {
		t.Fatalf("the version file: %q %v", b, err)
	}
	old := func(key, version string) string {
		dir := filepath.Join(s.Root(), "shifted", key)
		if err := os.MkdirAll(filepath.Join(dir, "tree"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "tree", "owned"), make([]byte, 64<<10), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "layers"), []byte(base.Hex()+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if version != "" {
			if err := os.WriteFile(filepath.Join(dir, "version"), []byte(version+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	s14, s15 := old("s14", ""), old("s15", "msb-shift-2")
	lease, err := s.Lease(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.GC(ctx); err != nil || r.Shifted != 0 {
		t.Fatalf("gc with the layers leased: %+v %v, want nothing removed", r, err)
	}
	lease.Release()
	r, err := s.GC(ctx)
	if err != nil || r.Shifted != 2 || r.ShiftedBytes < 2*64<<10 || r.FreedBytes < r.ShiftedBytes {
		t.Fatalf("gc of the old versions: %+v %v, want 2 removed and their 128 KiB", r, err)
	}
	for _, dir := range []string{s14, s15} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want it removed", dir, err)
		}
	}
	if _, err := os.Stat(cur); err != nil {
		t.Errorf("this version's tree: %v", err)
	}
}
