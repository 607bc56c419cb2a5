package store

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompactEarlyTree: an early tree kept in its layer's dir (another
// commit of the layer put its tree in place first: placeEarlyTree) goes
// when Compact makes the layer cold, once no lease holds the layer, so
// that the objects it links compress as any cold layer's; the layer thaws
// as it was.
func TestCompactEarlyTree(t *testing.T) {
	s := newStore(t)
	src := filepath.Join(t.TempDir(), "src")
	writeTree(t, src, map[string]node{
		"big.py":   {content: strings.Repeat("def f(x):\n    return x + 1\n", 20000)},
		"d/tool":   {content: "#!/bin/sh\n" + strings.Repeat("echo tool\n", 1000), mode: 0o755},
		"d/link":   {symlink: "tool"},
		"d/e/tiny": {content: "one block"},
	})
	data, record := laterStage(t, s, src, 1<<20)
	record.Discard()
	id := data.ID
	lease, err := s.PublishLeasedEarly(t.Context(), "", Early{
		Trees: func([]string) {},
		Place: func() { // another commit of the layer puts its tree in place
			if _, err := s.Materialize(t.Context(), id); err != nil {
				t.Fatal(err)
			}
		},
	}, data)
	if err != nil {
		t.Fatal(err)
	}
	early, err := filepath.Glob(filepath.Join(s.layerDir(id), earlyPrefix+"*"))
	if err != nil || len(early) != 1 {
		t.Fatalf("early trees kept in the layer's dir: %v %v", early, err)
	}
	want := view(t, s.TreePath(id))
	if r := compact(t, s, CompactOptions{}); len(r.Layers) != 0 || r.Leased != 1 {
		t.Fatalf("compact of the leased layer: %+v", r)
	}
	if _, err := os.Lstat(early[0]); err != nil {
		t.Fatalf("the early tree of a leased layer: %v", err)
	}
	lease.Release()

	r := compact(t, s, CompactOptions{})
	if len(r.Layers) != 1 || r.Objects != 2 || r.Skipped != 0 {
		t.Errorf("compact: %+v, want the layer and its two larger objects compressed, none skipped", r)
	}
	if _, err := os.Lstat(early[0]); !os.IsNotExist(err) {
		t.Errorf("the early tree outlived the compaction: %v", err)
	}
	verifyOK(t, s)
	lease, err = s.Lease(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	if got := view(t, s.TreePath(id)); !maps.Equal(got, want) {
		t.Errorf("thawed tree:\n%v\nwant\n%v", got, want)
	}
	verifyOK(t, s)
}
