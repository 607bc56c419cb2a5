package store

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLayerWriter: streamed files become a layer equal to the one CommitDir
// makes of the same tree; content added but never committed is not
// published, and a short stream is refused.
func TestLayerWriter(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	src := t.TempDir()
	writeTree(t, src, map[string]node{"a": {content: "hello\n", mode: 0o644}, "d": {dir: true, mode: 0o755}, "d/b": {content: "hello\n", mode: 0o755}})
	os.Chmod(src, 0o755)
	fromDir, err := s.CommitDir(ctx, src, CommitOptions{MapOwner: func(uint32, uint32) (uint32, uint32) { return 0, 0 }})
	if err != nil {
		t.Fatal(err)
	}

	s2 := newStore(t)
	w, err := s2.NewLayerWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	a := Entry{Path: "a", Type: TypeFile, Mode: 0o644, Size: 6}
	b := Entry{Path: "d/b", Type: TypeFile, Mode: 0o755, Size: 6}
	for _, e := range []*Entry{&b, &a} {
		if err := w.AddFile(ctx, e, strings.NewReader("hello\n")); err != nil {
			t.Fatal(err)
		}
	}
	short := Entry{Path: "c", Type: TypeFile, Mode: 0o644, Size: 10}
	if err := w.AddFile(ctx, &short, strings.NewReader("abc")); !errors.Is(err, ErrSizeMismatch) {
		t.Fatalf("short stream: %v, want ErrSizeMismatch", err)
	}
	m := &Manifest{Version: ManifestVersion, Entries: []Entry{b, {Path: "d", Type: TypeDir, Mode: 0o755}, a, {Path: ".", Type: TypeDir, Mode: 0o755}}}
	id, err := w.Commit(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if id != fromDir {
		t.Fatalf("streamed layer %s, CommitDir's %s", id, fromDir)
	}
	if err := w.SetRef("test/streamed", id); err != nil {
		t.Fatal(err)
	}
	orphan := Entry{Path: "x", Type: TypeFile, Mode: 0o644, Size: 7}
	if err := w.AddFile(ctx, &orphan, strings.NewReader("orphan\n")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if s2.HasObject(orphan.Digest) {
		t.Fatal("content added after the last Commit was published")
	}
	if tmp, _ := os.ReadDir(filepath.Join(s2.Root(), "tmp")); len(tmp) != 0 {
		t.Fatalf("temp files left: %v", tmp)
	}
	rep, err := s2.Verify(ctx)
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %v", err, rep.Problems)
	}
}

// xattrFixture commits a layer whose file d/ping has a capability,
// trusted.* and user.* attributes, d/plain the same bytes without, and
// directory d a user.* one; want maps each path to its attributes.
func xattrFixture(t *testing.T, s *Store) (id LayerID, want map[string][]Xattr) {
	t.Helper()
	ctx := t.Context()
	w, err := s.NewLayerWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	capFile := Entry{Path: "d/ping", Type: TypeFile, Mode: 0o755, Size: 6,
		Xattrs: []Xattr{{Name: "security.capability", Value: capV2}, {Name: "trusted.t", Value: []byte("1")}, {Name: "user.u", Value: []byte("2")}}}
	plainFile := Entry{Path: "d/plain", Type: TypeFile, Mode: 0o755, Size: 6}
	for _, e := range []*Entry{&capFile, &plainFile} {
		if err := w.AddFile(ctx, e, strings.NewReader("hello\n")); err != nil {
			t.Fatal(err)
		}
	}
	dir := Entry{Path: "d", Type: TypeDir, Mode: 0o755, Xattrs: []Xattr{{Name: "user.dir", Value: []byte("3")}}}
	m := &Manifest{Version: ManifestVersion, Entries: []Entry{{Path: ".", Type: TypeDir, Mode: 0o755}, dir, capFile, plainFile}}
	if id, err = w.Commit(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := w.SetRef("test/xattrs", id); err != nil {
		t.Fatal(err)
	}
	return id, map[string][]Xattr{"d/ping": capFile.Xattrs, "d": dir.Xattrs, "d/plain": nil}
}

// checkXattrs fails t unless the files under root have exactly want's
// attributes.
func checkXattrs(t *testing.T, root string, want map[string][]Xattr) {
	t.Helper()
	for p, w := range want {
		xs, err := readXattrs(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if encodeXattrs(xs) != encodeXattrs(w) {
			t.Errorf("%s in %s: xattrs %v, want %v", p, root, xs, w)
		}
	}
}

// TestLayerWriterXattrs: a file's and a directory's extended attributes
// reach the layer's tree (as root: the file capability, trusted.* and
// user.*), the file with them is its own inode, apart from the same
// content without them, ApplyLayers copies them, and Verify notices an
// inode that lost them.
func TestLayerWriterXattrs(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	s := newStore(t)
	id, want := xattrFixture(t, s)
	got, err := s.Manifest(id)
	if err != nil || got.Version != ManifestVersionXattrs {
		t.Fatalf("manifest: %v, version %v", err, got)
	}
	tree := s.TreePath(id)
	checkXattrs(t, tree, want)
	var a, b unix.Stat_t
	unix.Stat(filepath.Join(tree, "d/ping"), &a)
	unix.Stat(filepath.Join(tree, "d/plain"), &b)
	if a.Ino == b.Ino {
		t.Fatal("a file with a capability shares its inode with the same file without one")
	}
	merged := t.TempDir()
	if err := s.ApplyLayers(ctx, merged, []LayerID{id}); err != nil {
		t.Fatal(err)
	}
	checkXattrs(t, merged, want)
	if rep, err := s.Verify(ctx); err != nil || !rep.OK() {
		t.Fatalf("verify: %v %v", err, rep.Problems)
	}
	if err := unix.Removexattr(filepath.Join(tree, "d/ping"), "user.u"); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Verify(ctx)
	if err != nil || rep.OK() || rep.Problems[0].Kind != CorruptInode {
		t.Fatalf("verify after an inode lost an xattr: %v %v", err, rep.Problems)
	}
}

// TestTransferXattrs: a layer with extended attributes moves by export
// archive and by Pull with its attributes, which the receiving store sets
// on its own tree.
func TestTransferXattrs(t *testing.T) {
	requireRoot(t)
	src := newStore(t)
	id, want := xattrFixture(t, src)
	var buf bytes.Buffer
	if err := src.Export(t.Context(), &buf, ExportOptions{Refs: []string{"test/xattrs"}}); err != nil {
		t.Fatal(err)
	}
	imported := newStore(t)
	if _, err := imported.Import(t.Context(), &buf); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(src.Handler())
	defer srv.Close()
	pulled := newStore(t)
	if _, err := pulled.Pull(t.Context(), srv.URL, id, PullOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, dst := range []*Store{imported, pulled} {
		checkXattrs(t, dst.TreePath(id), want)
		if rep, err := dst.Verify(t.Context()); err != nil || !rep.OK() {
			t.Fatalf("verify: %v %v", err, rep.Problems)
		}
	}
}
