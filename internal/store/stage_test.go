package store

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// recordFile is the file of the record layer the tests stage above a
// directory's layer, as a snapshot's is.
var recordFile = File{Name: "record.json", Mode: 0o644, Data: []byte(`{"name": "r"}` + "\n")}

// stageWithRecord stages src's layer and a record layer above it.
func stageWithRecord(t testing.TB, s *Store, src string) (data, record *Staged) {
	t.Helper()
	return heldStage(t, s, src, 0)
}

func rootOwner(uint32, uint32) (uint32, uint32) { return 0, 0 }

// heldStage stages src's layer and a record layer above it, the data
// layer's new content held in memory up to hold bytes (none: 0).
func heldStage(t testing.TB, s *Store, src string, hold int64) (data, record *Staged) {
	t.Helper()
	data, err := s.StageDir(t.Context(), src, CommitOptions{MapOwner: rootOwner, HoldBytes: hold})
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

// laterStage stages src's layer holding its new content unhashed up to
// hold bytes (CommitOptions.HashLater), writes it out, which hashes it,
// and stages a record layer above it.
func laterStage(t testing.TB, s *Store, src string, hold int64) (data, record *Staged) {
	t.Helper()
	data, err := s.StageDir(t.Context(), src, CommitOptions{MapOwner: rootOwner, HoldBytes: hold, HashLater: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := data.WriteOut(t.Context()); err != nil {
		data.Discard()
		t.Fatal(err)
	}
	record, err = s.StageFiles(t.Context(), []LayerID{data.ID}, 0o700, recordFile)
	if err != nil {
		data.Discard()
		t.Fatal(err)
	}
	return data, record
}

// tempObjects are the object temp files in the store's tmp dir.
func tempObjects(t testing.TB, s *Store) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(s.Root(), "tmp", "obj-*"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestStagedWriteOut: a stage that holds its new content (HoldBytes)
// writes no temp file while it reads the source; WriteOut writes them
// and passes no barrier, and nothing is visible until Publish, which
// still fsyncs them in its first barrier (written out is not durable)
// and passes its three. The published layer verifies.
func TestStagedWriteOut(t *testing.T) {
	s := newStore(t)
	src := filepath.Join(t.TempDir(), "src")
	big := strings.Repeat("b", 200<<10) // held in its read buffer
	writeTree(t, src, map[string]node{"a": {content: "held a"}, "d/b": {content: big}, "e": {content: ""}})
	f := watchFlushes(s)
	data, record := heldStage(t, s, src, 8<<20)
	if tmp := tempObjects(t, s); len(tmp) != 0 {
		t.Fatalf("temp objects after a stage that holds its content: %v, want none (StageFiles holds the record's)", tmp)
	}
	if err := data.WriteOut(t.Context()); err != nil {
		t.Fatal(err)
	}
	written := tempObjects(t, s)
	if len(written) != 3 || len(f.whole) != 0 {
		t.Fatalf("after WriteOut: temp objects %v (want 3: the three files; the record held still), barriers %v (want none)", written, f.whole)
	}
	if s.Has(data.ID) || s.HasObject(DigestOf([]byte("held a"))) {
		t.Fatal("a staged layer is visible after WriteOut, before it is published")
	}
	if err := s.Publish(t.Context(), "r", data, record); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.whole, []bool{false, false, false}) {
		t.Fatalf("Publish after WriteOut passed barriers %v (paths %v), want three fsync barriers", f.whole, f.paths)
	}
	for _, p := range written {
		if !slices.Contains(f.paths[0], p) {
			t.Errorf("Publish's first barrier does not fsync %s: written out is not durable", p)
		}
	}
	checkHeldLayer(t, s, data.ID, map[string]string{"a": "held a", "d/b": big, "e": ""})
}

// TestStagedHeld: Publish writes held content itself; a stage holds no
// more than HoldBytes (the rest is written while the source is read);
// Discard drops held content and leaves no temp file.
func TestStagedHeld(t *testing.T) {
	s := newStore(t)
	src := filepath.Join(t.TempDir(), "src")
	files := map[string]node{}
	want := map[string]string{}
	for i := range 4 {
		c := fmt.Sprintf("%d %s", i, strings.Repeat("x", 10<<10))
		files[fmt.Sprintf("f%d", i)] = node{content: c}
		want[fmt.Sprintf("f%d", i)] = c
	}
	writeTree(t, src, files)
	data, record := heldStage(t, s, src, 25<<10) // two of the four fit
	if n := len(tempObjects(t, s)); n != 2 {
		t.Fatalf("%d temp objects after a stage that may hold two of four files, want 2 (two files; the record is held)", n)
	}
	if err := s.Publish(t.Context(), "r", data, record); err != nil {
		t.Fatal(err)
	}
	checkHeldLayer(t, s, data.ID, want)
	if tmp := tempObjects(t, s); len(tmp) != 0 {
		t.Fatalf("temp objects left after Publish: %v", tmp)
	}

	s2 := newStore(t)
	data, record = heldStage(t, s2, src, 1<<20)
	record.Discard()
	data.Discard()
	if tmp := tempObjects(t, s2); len(tmp) != 0 {
		t.Fatalf("temp objects left after Discard: %v", tmp)
	}
	if s2.HasObject(DigestOf([]byte(want["f0"]))) {
		t.Fatal("a discarded stage's content is in the store")
	}
}

// checkHeldLayer checks that layer id is published with files' content
// and that the store verifies.
func checkHeldLayer(t *testing.T, s *Store, id LayerID, files map[string]string) {
	t.Helper()
	for name, c := range files {
		b, err := os.ReadFile(filepath.Join(s.TreePath(id), name))
		if err != nil || string(b) != c {
			t.Errorf("%s in the published layer: %d bytes (%v), want %d", name, len(b), err, len(c))
		}
	}
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Fatalf("verify: %v %v", err, r.Problems)
	}
}

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

// TestStagedHashLater: a stage that hashes later (HashLater) only reads
// what it holds: no temp file, no ID, until WriteOut hashes it, drops
// what the store has (an object committed before) or another file of
// the stage brings (a duplicate), and writes the rest; its ID is the one
// the same directory staged the usual way gets, files larger than 1 MiB
// and those past HoldBytes are hashed and written while the source is
// read, as before. The published layer verifies; Publish hashes a stage
// not written out itself; Discard of an unhashed stage leaves nothing.
func TestStagedHashLater(t *testing.T) {
	s := newStore(t)
	src := filepath.Join(t.TempDir(), "src")
	known := "known before " + strings.Repeat("k", 100)
	dup := strings.Repeat("d", 100<<10) // held in its read buffer
	large := strings.Repeat("l", 1<<20+1)
	nodes := map[string]node{"known": {content: known}, "dup1": {content: dup}, "sub/dup2": {content: dup},
		"empty": {content: ""}, "large": {content: large}, "sub/x": {content: "x"}, "sub/y": {content: "y", mode: 0o600}}
	writeTree(t, src, nodes)
	before := filepath.Join(t.TempDir(), "before")
	writeTree(t, before, map[string]node{"k": {content: known}})
	if _, err := s.CommitDir(t.Context(), before, CommitOptions{MapOwner: rootOwner}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for name, n := range nodes {
		want[name] = n.content
	}
	usual, err := s.StageDir(t.Context(), src, CommitOptions{MapOwner: rootOwner})
	if err != nil {
		t.Fatal(err)
	}
	usual.Discard()

	data, err := s.StageDir(t.Context(), src, CommitOptions{MapOwner: rootOwner, HoldBytes: 8 << 20, HashLater: true})
	if err != nil {
		t.Fatal(err)
	}
	if tmp := tempObjects(t, s); len(tmp) != 1 || data.ID != (LayerID{}) {
		t.Fatalf("after a stage that hashes later: temp objects %v (want the large file's only), ID %s (want none yet)", tmp, data.ID)
	}
	if err := data.WriteOut(t.Context()); err != nil {
		t.Fatal(err)
	}
	// large, dup, empty, x, y: known is in the store, dup once.
	if tmp := tempObjects(t, s); len(tmp) != 5 || data.ID != usual.ID {
		t.Fatalf("after WriteOut: temp objects %v (want 5), ID %s (want %s, as staged the usual way)", tmp, data.ID, usual.ID)
	}
	record, err := s.StageFiles(t.Context(), []LayerID{data.ID}, 0o700, recordFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(t.Context(), "r", data, record); err != nil {
		t.Fatal(err)
	}
	checkHeldLayer(t, s, data.ID, want)
	if tmp := tempObjects(t, s); len(tmp) != 0 {
		t.Fatalf("temp objects left after Publish: %v", tmp)
	}

	s2 := newStore(t)
	data, err = s2.StageDir(t.Context(), src, CommitOptions{MapOwner: rootOwner, HoldBytes: 8 << 20, HashLater: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Publish(t.Context(), "", data); err != nil || data.ID != usual.ID {
		t.Fatalf("Publish of a stage not written out: %v, ID %s, want %s", err, data.ID, usual.ID)
	}
	checkHeldLayer(t, s2, usual.ID, want)

	s3 := newStore(t)
	data, err = s3.StageDir(t.Context(), src, CommitOptions{MapOwner: rootOwner, HoldBytes: 8 << 20, HashLater: true})
	if err != nil {
		t.Fatal(err)
	}
	data.Discard()
	if tmp := tempObjects(t, s3); len(tmp) != 0 {
		t.Fatalf("temp objects left after Discard of an unhashed stage: %v", tmp)
	}

	// Hashed only: named, nothing more written; Publish writes it.
	s4 := newStore(t)
	data, err = s4.StageDir(t.Context(), src, CommitOptions{MapOwner: rootOwner, HoldBytes: 8 << 20, HashLater: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := data.Hash(t.Context()); err != nil {
		t.Fatal(err)
	}
	if tmp := tempObjects(t, s4); len(tmp) != 1 || data.ID != usual.ID {
		t.Fatalf("after Hash: temp objects %v (want the large file's only), ID %s (want %s)", tmp, data.ID, usual.ID)
	}
	// large, dup once, empty, x, y, known: what the layer brings.
	if got := data.Created(); len(got) != 6 {
		t.Fatalf("after Hash the stage brings %d objects, want 6", len(got))
	}
	record, err = s4.StageFiles(t.Context(), []LayerID{data.ID}, 0o700, recordFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := s4.Publish(t.Context(), "r", data, record); err != nil {
		t.Fatal(err)
	}
	checkHeldLayer(t, s4, usual.ID, want)
	if tmp := tempObjects(t, s4); len(tmp) != 0 {
		t.Fatalf("temp objects left after Publish of a hashed stage: %v", tmp)
	}
	s5 := newStore(t)
	data, err = s5.StageDir(t.Context(), src, CommitOptions{MapOwner: rootOwner, HoldBytes: 8 << 20, HashLater: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := data.Hash(t.Context()); err != nil {
		t.Fatal(err)
	}
	data.Discard()
	if tmp := tempObjects(t, s5); len(tmp) != 0 {
		t.Fatalf("temp objects left after Discard of a hashed stage: %v", tmp)
	}
}
