package store

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCommitTree: a directory written as a tree stream (WriteTree) and
// committed from it (CommitTree) is the layer CommitDir makes of it, its
// overlay markers (an xattr whiteout, an opaque directory), modes, a
// symlink and a fifo included; MapOwner applies as in CommitDir; a stream
// cut short is ErrTreeStream and commits nothing.
func TestCommitTree(t *testing.T) {
	s := newStore(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]node{
		"private/key": {content: "secret", mode: 0o600},
		"private":     {dir: true, mode: 0o700},
		"big":         {content: string(bytes.Repeat([]byte("x"), smallFile+3))},
		"gone":        {content: ""},
		"opaque/new":  {content: "new"},
		"link":        {symlink: "private/key"},
		"fifo":        {fifo: true},
	})
	for path, attr := range map[string]string{"gone": "whiteout", "opaque": "opaque"} {
		if err := unix.Lsetxattr(filepath.Join(dir, path), "user.overlay."+attr, []byte("y"), 0); err != nil {
			t.Fatal(err)
		}
	}
	mine := func(uid, gid uint32) (uint32, uint32) { return uid + 1, gid + 2 }
	for _, opts := range []CommitOptions{{}, {MapOwner: mine}} {
		want, err := s.CommitDir(t.Context(), dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		var stream bytes.Buffer
		if err := WriteTree(t.Context(), &stream, dir); err != nil {
			t.Fatal(err)
		}
		got, err := s.CommitTree(t.Context(), bytes.NewReader(stream.Bytes()), opts)
		if err != nil || got != want {
			t.Fatalf("CommitTree: %s %v, want CommitDir's %s", got, err, want)
		}
		cut := stream.Bytes()[:stream.Len()-smallFile]
		if id, err := s.CommitTree(t.Context(), bytes.NewReader(cut), opts); !errors.Is(err, ErrTreeStream) && !errors.Is(err, ErrSizeMismatch) {
			t.Fatalf("a stream cut short: %s %v", id, err)
		}
	}
	m, err := s.Manifest(mustCommitDir(t, s, dir))
	if err != nil {
		t.Fatal(err)
	}
	kinds, opaque := map[string]EntryType{}, map[string]bool{}
	for _, e := range m.Entries {
		kinds[e.Path], opaque[e.Path] = e.Type, e.Opaque
	}
	if kinds["gone"] != TypeDelete || kinds["fifo"] != TypeFifo || kinds["link"] != TypeSymlink || !opaque["opaque"] {
		t.Fatalf("entries %v, opaque %v", kinds, opaque)
	}
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Fatalf("the store after a stream cut short: %v %v", err, r.Problems)
	}
	if n := countFiles(t, filepath.Join(s.Root(), "tmp")); n != 0 {
		t.Fatalf("%d temp files left", n)
	}
}

func mustCommitDir(t *testing.T, s *Store, dir string) LayerID {
	t.Helper()
	id, err := s.CommitDir(t.Context(), dir, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return id
}
