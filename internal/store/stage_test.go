package store

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// recordFile is the file of the record layer the tests stage above a
// directory's layer, as a snapshot's is.
var recordFile = File{Name: "record.json", Mode: 0o644, Data: []byte(`{"name": "r"}` + "\n")}

// stageWithRecord stages src's layer and a record layer above it.
func stageWithRecord(t testing.TB, s *Store, src string) (data, record *Staged) {
	t.Helper()
	data, err := s.StageDir(t.Context(), src, CommitOptions{MapOwner: rootOwner})
	if err != nil {
		t.Fatal(err)
	}
	record, err = s.StageFiles(t.Context(), []LayerID{data.ID}, 0o700, recordFile)
	if err != nil {
		data.Discard()
		t.Fatal(err)
	}
	return data, record
}

func rootOwner(uint32, uint32) (uint32, uint32) { return 0, 0 }

// TestPublishTwoLayers: a directory's layer and a record layer above it,
// staged and published together with a ref, pass the three barriers of
// one commit; the ref names the record, whose parent is the directory's
// layer; both trees are in place; and the record layer is the one a
// commit of a directory holding just the file would make.
func TestPublishTwoLayers(t *testing.T) {
	s := newStore(t)
	src := filepath.Join(t.TempDir(), "src")
	writeTree(t, src, map[string]node{"a": {content: "two a"}, "d/b": {content: "two b"}})
	f := watchFlushes(s)
	data, record := stageWithRecord(t, s, src)
	if s.Has(data.ID) || s.HasObject(DigestOf([]byte("two a"))) {
		t.Fatal("a staged layer is visible before it is published")
	}
	if err := s.Publish(t.Context(), "r", data, record); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.whole, []bool{false, false, false}) {
		t.Fatalf("publishing two layers passed barriers %v (paths %v), want three fsync barriers", f.whole, f.paths)
	}
	if got, err := s.Ref("r"); err != nil || got != record.ID {
		t.Fatalf("ref r = %s (%v), want the record layer %s", got, err, record.ID)
	}
	m, err := s.Manifest(record.ID)
	if err != nil || !slices.Equal(m.Parents, []LayerID{data.ID}) {
		t.Fatalf("record layer's parents %v (%v), want [%s]", m, err, data.ID)
	}
	for _, p := range []string{filepath.Join(s.TreePath(data.ID), "d", "b"), filepath.Join(s.TreePath(record.ID), recordFile.Name)} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("tree not in place: %v", err)
		}
	}
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Fatalf("verify: %v %v", err, r.Problems)
	}

	dir := filepath.Join(t.TempDir(), "record")
	writeTree(t, dir, map[string]node{recordFile.Name: {content: string(recordFile.Data), mode: 0o644}})
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	id, err := s.CommitDir(t.Context(), dir, CommitOptions{Parents: []LayerID{data.ID}, MapOwner: rootOwner})
	if err != nil || id != record.ID {
		t.Fatalf("a commit of the record's directory gave %s (%v), StageFiles %s", id, err, record.ID)
	}
}

// TestPublishDiscards: a staged layer discarded, or one whose Publish
// fails (its parent is neither in the store nor staged before it), leaves
// no temp file and no layer, and does not hold the store's lock.
func TestPublishDiscards(t *testing.T) {
	s := newStore(t)
	src := filepath.Join(t.TempDir(), "src")
	writeTree(t, src, map[string]node{"a": {content: "discarded a"}})
	data, record := stageWithRecord(t, s, src)
	data.Discard()
	if err := s.Publish(t.Context(), "r", record); err == nil {
		t.Fatal("a record published without its parent")
	}
	data, record = stageWithRecord(t, s, src)
	if err := s.Publish(t.Context(), "r", record, data); err == nil {
		t.Fatal("a record published before its parent")
	}
	if tmp, _ := os.ReadDir(s.path("tmp")); len(tmp) > 0 {
		t.Errorf("temp files left: %v", tmp)
	}
	if _, err := s.Ref("r"); err == nil || s.Has(data.ID) {
		t.Error("a failed publish left a ref or a layer")
	}
	if _, err := s.GC(t.Context()); err != nil { // takes the lock exclusively
		t.Fatal(err)
	}
}
