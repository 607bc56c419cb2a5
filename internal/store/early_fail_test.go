package store

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPublishEarlyFails: a publication that fails after it handed out
// its early trees calls Place before it removes them, so that what mounts
// them is let go (the engine's mounts in flight end) before any file goes;
// then the trees are gone and nothing of the layer is in the store.
func TestPublishEarlyFails(t *testing.T) {
	s := newStore(t)
	src := filepath.Join(t.TempDir(), "src")
	writeTree(t, src, earlyNodes)
	data, record := laterStage(t, s, src, 1<<20)
	record.Discard()
	id := data.ID
	var tree string
	placed := false
	_, err := s.PublishLeasedEarly(t.Context(), "", Early{
		Trees: func(trees []string) {
			tree = trees[0]
			// The new content's temp files go: linking them as objects
			// fails, after the trees were handed out.
			ents, err := os.ReadDir(s.path("tmp"))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				os.Remove(s.path("tmp", e.Name()))
			}
		},
		Place: func() {
			placed = true
			if _, err := os.Lstat(tree); err != nil {
				t.Errorf("the early tree at Place: %v, want it still there", err)
			}
		},
	}, data)
	if err == nil {
		t.Fatal("the publication succeeded without its new content")
	}
	if !placed {
		t.Fatalf("the publication failed (%v) without calling Place", err)
	}
	if _, err := os.Lstat(tree); !os.IsNotExist(err) {
		t.Fatalf("the early tree after the failure: %v, want it removed", err)
	}
	if s.Has(id) {
		t.Fatal("the layer is in the store after its publication failed")
	}
}
