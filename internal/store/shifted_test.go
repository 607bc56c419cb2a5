package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestShifted: a shifted tree is built once per key (a failed build leaves
// nothing), is found by IsShifted, and GC keeps it while all its layers
// live (a ref, a lease) and removes it with the first of them, and removes
// a half-built one.
func TestShifted(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	base := commitNodes(t, s, map[string]node{"a": {content: "a"}}, CommitOptions{Ref: "env/base"})
	top := commitNodes(t, s, map[string]node{"b": {content: "b"}}, CommitOptions{Parents: []LayerID{base}})
	builds := 0
	build := func(ctx context.Context, tree string) error {
		builds++
		return os.WriteFile(filepath.Join(tree, "owned"), []byte("x"), 0o644)
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
	if !s.IsShifted(one) || s.IsShifted(s.TreePath(base)) || s.IsShifted(filepath.Dir(one)) {
		t.Fatal("IsShifted")
	}
	if _, ok := s.TreeLayer(one); ok {
		t.Fatal("a shifted tree taken for a layer")
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
	if r, err = s.GC(ctx); err != nil || r.Shifted != 1 {
		t.Fatalf("gc after the lease: %+v %v", r, err)
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
