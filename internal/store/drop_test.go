package store

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
)

// TestDrop: a layer staged after a mark and published leased is dropped
// once its lease is released, with the content it brought and no other
// layer uses; content of its parents, of layers from before the mark and
// of a layer published since that shares it stays, and the store
// verifies. It is kept while another holds it (its lease, a ref of a
// layer above it), or when the mark had it already.
func TestDrop(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	commit := func(parents []LayerID, ref string, files map[string]node) LayerID {
		t.Helper()
		dir := t.TempDir()
		writeTree(t, dir, files)
		id, err := s.CommitDir(ctx, dir, CommitOptions{Parents: parents, Ref: ref})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	base := commit(nil, "base", map[string]node{"a": {content: "base"}, "old": {content: "old garbage"}})
	commit(nil, "", map[string]node{"g": {content: "before the mark"}}) // unnamed, not leased: GC's
	mark, err := s.Mark()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeTree(t, dir, map[string]node{"a": {content: "base"}, "b": {content: "brought"}, "c": {content: "shared since"},
		"g": {content: "before the mark"}})
	st, err := s.StageDir(ctx, dir, CommitOptions{Parents: []LayerID{base}})
	if err != nil {
		t.Fatal(err)
	}
	created := st.Created()
	lease, err := s.PublishLeased(ctx, "", st)
	if err != nil {
		t.Fatal(err)
	}
	id := st.ID
	if len(created) != 2 {
		t.Fatalf("created %d objects, want 2 (b, c)", len(created))
	}
	other := commit(nil, "", map[string]node{"c2": {content: "shared since"}})
	otherLease, err := s.Lease(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	defer otherLease.Release()

	if r, err := s.Drop(ctx, id, Mark{had: map[LayerID]bool{id: true}}, created); err != nil || r.Kept == "" {
		t.Fatalf("drop of a layer the mark had: %+v %v", r, err)
	}
	if r, err := s.Drop(ctx, id, mark, created); err != nil || r.Kept != "leased" {
		t.Fatalf("drop of a leased layer: %+v %v", r, err)
	}
	lease.Release()
	top := commit([]LayerID{id}, "top", map[string]node{"t": {content: "top"}})
	if r, err := s.Drop(ctx, id, mark, created); err != nil || r.Kept != "ref top" {
		t.Fatalf("drop of a layer under a ref: %+v %v", r, err)
	}
	if err := s.DeleteRef("top"); err != nil {
		t.Fatal(err)
	}
	s.Drop(ctx, top, mark, nil)

	r, err := s.Drop(ctx, id, mark, created)
	if err != nil || r.Kept != "" || r.Objects != 1 {
		t.Fatalf("drop: %+v %v, want 1 object removed", r, err)
	}
	for _, p := range []string{s.manifestPath(id), s.layerDir(id), s.objectPath(sha256.Sum256([]byte("brought")))} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s after the drop: %v", p, err)
		}
	}
	for _, c := range []string{"base", "shared since", "before the mark"} {
		if !s.HasObject(sha256.Sum256([]byte(c))) {
			t.Errorf("object %q dropped", c)
		}
	}
	names, _ := filepath.Glob(filepath.Join(s.root, "inodes", "*", "*"))
	for _, n := range names {
		h := sha256.Sum256([]byte("brought"))
		if filepath.Base(n)[:64] == Digest(h).Hex() {
			t.Errorf("inode %s after the drop", n)
		}
	}
	if rep, err := s.Verify(ctx); err != nil || !rep.OK() {
		t.Fatalf("verify after the drop: %v %v", rep.Problems, err)
	}
	if r, err := s.Drop(ctx, id, mark, created); err != nil || r.Kept != "not in the store" {
		t.Fatalf("second drop: %+v %v", r, err)
	}
}
