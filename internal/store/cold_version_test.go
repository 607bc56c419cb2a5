package store

import (
	"maps"
	"os"
	"testing"
)

// TestColdAfterOpen: a Store that saw VERSION 1 skips the compressed
// paths of a store never compacted (Store.cold), and still finds them
// once another process compacts the store: each lock it takes reads
// VERSION again. Two Stores on one root stand for the two processes.
func TestColdAfterOpen(t *testing.T) {
	s := newStore(t)
	base, env, views := coldLayers(t, s)
	if s.cold.Load() {
		t.Fatal("a new store counts as compacted")
	}
	other, err := Open(s.Root())
	if err != nil {
		t.Fatal(err)
	}
	r := compact(t, other, CompactOptions{})
	if r.Objects == 0 || len(r.Layers) != 2 {
		t.Fatalf("compact: %+v", r)
	}
	m, err := s.Manifest(base)
	if err != nil {
		t.Fatal(err)
	}
	var cold Digest
	for _, e := range m.Entries {
		if e.Path == "usr/lib/big.py" {
			cold = e.Digest
		}
	}
	if s.HasRawObject(cold) || !other.HasObject(cold) {
		t.Fatalf("big.py's object: raw %v, compressed %v", s.HasRawObject(cold), other.HasObject(cold))
	}
	lease, err := s.Lease(t.Context(), env) // thaws both layers
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	if !s.cold.Load() {
		t.Error("the store lock taken after the compaction left it counted as never compacted")
	}
	for _, id := range []LayerID{base, env} {
		if got := view(t, s.TreePath(id)); !maps.Equal(got, views[id]) {
			t.Errorf("layer %s thawed:\n%v\nwant\n%v", id.Short(), got, views[id])
		}
	}
	if !s.HasObject(cold) {
		t.Error("thawed object missing")
	}
	verifyOK(t, s)

	// Reopened on the compacted store, as a new process opens it.
	again, err := Open(s.Root())
	if err != nil {
		t.Fatal(err)
	}
	if !again.cold.Load() {
		t.Error("a store opened at VERSION 2 counts as never compacted")
	}
	if _, err := os.Stat(again.compressedPath(cold)); !os.IsNotExist(err) {
		t.Errorf("compressed copy of a thawed object: %v", err)
	}
}
