package store

import (
	"os"
	"strings"
	"testing"
)

// TestDropCompacted: a layer made cold (Compact) and then dropped takes
// its compressed objects with it, as a warm one takes its raw ones, and
// the store verifies.
func TestDropCompacted(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	mark, err := s.Mark()
	if err != nil {
		t.Fatal(err)
	}
	content := strings.Repeat("def f(x):\n    return x + 1\n", 20000) // many blocks, compressible
	dir := t.TempDir()
	writeTree(t, dir, map[string]node{"big.py": {content: content}})
	st, err := s.StageDir(ctx, dir, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := st.Created()
	lease, err := s.PublishLeased(ctx, "", st)
	if err != nil {
		t.Fatal(err)
	}
	id := st.ID
	lease.Release()
	if r := compact(t, s, CompactOptions{UnusedFor: -1, Layers: []LayerID{id}}); r.Objects != 1 {
		t.Fatalf("compact: %+v, want 1 object compressed", r)
	}
	d := DigestOf([]byte(content))
	if !s.hasCompressed(d) || s.HasRawObject(d) {
		t.Fatalf("after compact: compressed %v, raw %v; want only compressed", s.hasCompressed(d), s.HasRawObject(d))
	}
	r, err := s.Drop(ctx, id, mark, created)
	if err != nil || r.Kept != "" || r.Objects != 1 {
		t.Fatalf("drop: %+v %v, want 1 object removed", r, err)
	}
	if _, err := os.Lstat(s.compressedPath(d)); !os.IsNotExist(err) {
		t.Fatalf("the dropped layer's compressed object is still there: %v", err)
	}
	verifyOK(t, s)
}
