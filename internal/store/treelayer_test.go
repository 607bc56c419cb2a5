package store

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTreeLayer maps a layer's tree path back to the layer, and nothing
// else to one.
func TestTreeLayer(t *testing.T) {
	s := newStore(t)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	id, err := s.CommitDir(t.Context(), src, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tree := s.TreePath(id)
	if got, ok := s.TreeLayer(tree); !ok || got != id {
		t.Fatalf("TreeLayer(%s) = %s, %v", tree, got, ok)
	}
	if got, ok := s.TreeLayer(tree + "/"); !ok || got != id {
		t.Fatalf("TreeLayer(%s/) = %s, %v", tree, got, ok)
	}
	for _, p := range []string{src, filepath.Dir(tree), filepath.Join(t.TempDir(), "layers", id.Hex(), "tree"), filepath.Join(tree, "f")} {
		if got, ok := s.TreeLayer(p); ok {
			t.Errorf("TreeLayer(%s) = %s, want none", p, got)
		}
	}
}
