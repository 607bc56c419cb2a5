package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func sampleTree() map[string]node {
	return map[string]node{
		"bin/tool":            {content: "#!/bin/sh\necho hi\n", mode: 0o755},
		"bin/suid":            {content: "suid", mode: 0o755 | os.ModeSetuid},
		"lib/a.py":            {content: "print('a')\n"},
		"lib/b.py":            {content: "print('a')\n"}, // same content as a.py
		"lib/empty":           {content: ""},
		"lib/ro":              {content: "read only", mode: 0o444},
		"lib/link":            {symlink: "a.py"},
		"lib/abs":             {symlink: "/etc/passwd"},
		"lib/fifo":            {fifo: true},
		"lib/sub/deep/x.txt":  {content: strings.Repeat("x", 3<<20)}, // > smallFile
		"locked":              {dir: true, mode: 0o555},
		"locked/inside":       {content: "in a read-only dir"},
		"sticky":              {dir: true, mode: 0o1777},
		"name with space":     {content: "space"},
		"bad-\xff-utf8":       {content: "not utf-8 name"},
		"emptydir":            {dir: true, mode: 0o700},
		"unicode-é/naïve.txt": {content: "ü"},
	}
}

func TestCommitMaterializesIdenticalTree(t *testing.T) {
	s := newStore(t)
	src := t.TempDir()
	writeTree(t, src, sampleTree())
	id, err := s.CommitDir(t.Context(), src, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := view(t, src)
	got := view(t, s.TreePath(id))
	if s.Rootless() {
		for p, v := range want { // the caller owns everything
			want[p] = strings.NewReplacer(fmt.Sprintf("uid=%d gid=%d", 0, 0), fmt.Sprintf("uid=%d gid=%d", s.uid, s.gid)).Replace(v)
		}
	}
	diffViews(t, want, got)

	// Files are links into the inode pool; same content and metadata share one inode.
	var a, b unix.Stat_t
	unix.Lstat(filepath.Join(s.TreePath(id), "lib/a.py"), &a)
	unix.Lstat(filepath.Join(s.TreePath(id), "lib/b.py"), &b)
	if a.Ino != b.Ino {
		t.Errorf("a.py and b.py have the same content and metadata but different inodes")
	}
	if a.Nlink < 3 {
		t.Errorf("a.py has %d links, want >= 3 (two tree names, pool, object)", a.Nlink)
	}

	// Committing again gives the same ID and nothing new.
	id2, err := s.CommitDir(t.Context(), src, CommitOptions{})
	if err != nil || id2 != id {
		t.Fatalf("recommit: %v, %s != %s", err, id2, id)
	}
	m, err := s.Manifest(id)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := m.ID(); err != nil || got != id {
		t.Fatalf("manifest ID %s, want %s (%v)", got, id, err)
	}
	r, err := s.Verify(t.Context())
	if err != nil || !r.OK() {
		t.Fatalf("verify: %v %v", err, r.Problems)
	}
}

func TestSameContentDifferentMetadataGetsOwnInode(t *testing.T) {
	s := newStore(t)
	src := t.TempDir()
	writeTree(t, src, map[string]node{
		"x": {content: "same", mode: 0o644},
		"y": {content: "same", mode: 0o755},
	})
	id, err := s.CommitDir(t.Context(), src, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var x, y unix.Stat_t
	unix.Lstat(filepath.Join(s.TreePath(id), "x"), &x)
	unix.Lstat(filepath.Join(s.TreePath(id), "y"), &y)
	if x.Ino == y.Ino || x.Mode&0o777 != 0o644 || y.Mode&0o777 != 0o755 {
		t.Fatalf("x %o ino %d, y %o ino %d: want distinct inodes with their own modes", x.Mode, x.Ino, y.Mode, y.Ino)
	}
	if n := countFiles(t, s.path("objects")); n != 1 {
		t.Errorf("%d objects, want 1", n)
	}
	if n := countFiles(t, s.path("inodes")); n != 2 {
		t.Errorf("%d inodes, want 2", n)
	}
}

func TestOwnersRecorded(t *testing.T) {
	requireRoot(t)
	s := newStore(t)
	src := t.TempDir()
	writeTree(t, src, map[string]node{"f": {content: "owned"}, "d": {dir: true}, "l": {symlink: "f"}})
	for _, p := range []string{"f", "d", "l"} {
		if err := os.Lchown(filepath.Join(src, p), 1234, 5678); err != nil {
			t.Fatal(err)
		}
	}
	id, err := s.CommitDir(t.Context(), src, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	diffViews(t, view(t, src), view(t, s.TreePath(id)))

	// Rootless: owners are in the manifest, but the tree is the caller's.
	rl, err := OpenOptions(filepath.Join(t.TempDir(), "rl"), Options{Rootless: true})
	if err != nil {
		t.Fatal(err)
	}
	id2, err := rl.CommitDir(t.Context(), src, CommitOptions{})
	if err != nil || id2 != id {
		t.Fatalf("rootless commit: %v, id %s want %s", err, id2, id)
	}
	m, _ := rl.Manifest(id2)
	for _, e := range m.Entries[1:] {
		if e.UID != 1234 || e.GID != 5678 {
			t.Errorf("manifest entry %s owner %d:%d, want 1234:5678", e.Path, e.UID, e.GID)
		}
	}
	var st unix.Stat_t
	unix.Lstat(filepath.Join(rl.TreePath(id2), "f"), &st)
	if st.Uid != 0 || st.Gid != 0 {
		t.Errorf("rootless tree file owned by %d:%d, want the caller 0:0", st.Uid, st.Gid)
	}
	if r, err := rl.Verify(t.Context()); err != nil || !r.OK() {
		t.Fatalf("verify rootless: %v %v", err, r.Problems)
	}
}

func TestRelocatable(t *testing.T) {
	base := t.TempDir()
	s, err := Open(filepath.Join(base, "a"))
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	writeTree(t, src, sampleTree())
	id, err := s.CommitDir(t.Context(), src, CommitOptions{Ref: "env/k1"})
	if err != nil {
		t.Fatal(err)
	}
	want := view(t, s.TreePath(id))
	if err := os.Rename(filepath.Join(base, "a"), filepath.Join(base, "b")); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(filepath.Join(base, "b"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s2.Ref("env/k1")
	if err != nil || got != id {
		t.Fatalf("ref after move: %s %v", got, err)
	}
	diffViews(t, want, view(t, s2.TreePath(id)))
	if r, err := s2.Verify(t.Context()); err != nil || !r.OK() {
		t.Fatalf("verify after move: %v %v", err, r.Problems)
	}
	// Rebuilding the tree from the moved store works too.
	os.RemoveAll(s2.layerDir(id))
	if _, err := s2.Materialize(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	diffViews(t, want, view(t, s2.TreePath(id)))
	if _, err := s2.GC(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !s2.Has(id) {
		t.Fatal("gc removed a referenced layer after the move")
	}
}

func TestOpenRejects(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "unrelated"), nil, 0o644)
	if _, err := Open(dir); err == nil {
		t.Error("Open of a non-empty non-store dir succeeded")
	}
	dir2 := t.TempDir()
	os.WriteFile(filepath.Join(dir2, "VERSION"), []byte("msb-store 99\n"), 0o644)
	if _, err := Open(dir2); !errors.Is(err, ErrVersion) {
		t.Errorf("Open of a future store: %v, want ErrVersion", err)
	}
}

// failingWriter fails with err after n bytes, like a disk that fills up.
type failingWriter struct {
	w   io.Writer
	n   int
	err error
}

func (f *failingWriter) Write(b []byte) (int, error) {
	if len(b) > f.n {
		m, _ := f.w.Write(b[:f.n])
		f.n = 0
		return m, f.err
	}
	f.n -= len(b)
	return f.w.Write(b)
}

func assertNothingVisible(t *testing.T, s *Store) {
	t.Helper()
	for _, d := range []string{"objects", "inodes", "manifests", "tmp", "refs"} {
		if n := countFiles(t, s.path(d)); n != 0 {
			t.Errorf("%s holds %d files after a failed write", d, n)
		}
	}
	ents, _ := os.ReadDir(s.path("layers"))
	if len(ents) != 0 {
		t.Errorf("layers holds %d entries after a failed write", len(ents))
	}
}

func TestFailedWritesLeaveNothing(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]node{"small": {content: "hello"}, "big": {content: strings.Repeat("b", 2<<20)}})

	t.Run("enospc mid-object", func(t *testing.T) {
		s := newStore(t)
		s.hooks.wrapWriter = func(w io.Writer) io.Writer { return &failingWriter{w: w, n: 1000, err: syscall.ENOSPC} }
		_, err := s.CommitDir(t.Context(), src, CommitOptions{Ref: "env/x"})
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("commit: %v, want ENOSPC", err)
		}
		if !strings.Contains(err.Error(), "writing object sha256:") {
			t.Errorf("error does not name the object: %v", err)
		}
		assertNothingVisible(t, s)
	})
	t.Run("short reader", func(t *testing.T) {
		s := newStore(t)
		d := DigestOf([]byte("hello world"))
		err := s.PutObject(t.Context(), strings.NewReader("hello"), 11, d)
		if !errors.Is(err, ErrSizeMismatch) {
			t.Fatalf("put: %v, want ErrSizeMismatch", err)
		}
		assertNothingVisible(t, s)
	})
	t.Run("wrong content", func(t *testing.T) {
		s := newStore(t)
		d := DigestOf([]byte("hello world"))
		err := s.PutObject(t.Context(), strings.NewReader("hello WORLD"), 11, d)
		if !errors.Is(err, ErrDigestMismatch) {
			t.Fatalf("put: %v, want ErrDigestMismatch", err)
		}
		assertNothingVisible(t, s)
	})
	t.Run("put ok", func(t *testing.T) {
		s := newStore(t)
		d := DigestOf([]byte("hello world"))
		if err := s.PutObject(t.Context(), strings.NewReader("hello world"), 11, d); err != nil {
			t.Fatal(err)
		}
		f, err := s.OpenObject(d)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		fi, _ := f.Stat()
		if string(b) != "hello world" || fi.Mode().Perm() != 0o444 {
			t.Fatalf("object %q mode %v", b, fi.Mode())
		}
	})
}

// TestRealFullDisk commits into a store on a tiny tmpfs.
func TestRealFullDisk(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unmount(t, dir) })
	s, err := Open(filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	writeTree(t, src, map[string]node{"a": {content: "fits"}, "big": {content: strings.Repeat("z", 2<<20)}})
	_, err = s.CommitDir(t.Context(), src, CommitOptions{Ref: "env/full"})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("commit on a full disk: %v, want ENOSPC", err)
	}
	assertNothingVisible(t, s)
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Fatalf("verify: %v %v", err, r.Problems)
	}
}

func TestCopyFallback(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, sampleTree())
	t.Run("injected EXDEV", func(t *testing.T) {
		s := newStore(t)
		var logs bytes.Buffer
		s.log = slogTo(&logs)
		s.hooks.link = func(string, string) error { return &os.LinkError{Op: "link", Err: unix.EXDEV} }
		id, err := s.CommitDir(t.Context(), src, CommitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkView(t, s, src, id)
		if !strings.Contains(logs.String(), "copied instead") {
			t.Errorf("copy fallback not logged: %q", logs.String())
		}
		if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
			t.Fatalf("verify: %v %v", err, r.Problems)
		}
	})
	t.Run("layers on another filesystem", func(t *testing.T) {
		requireRoot(t)
		s := newStore(t)
		if err := unix.Mount("tmpfs", s.path("layers"), "tmpfs", 0, "size=64m"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unmount(t, s.path("layers")) })
		id, err := s.CommitDir(t.Context(), src, CommitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkView(t, s, src, id)
		if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
			t.Fatalf("verify: %v %v", err, r.Problems)
		}
	})
}

func checkView(t *testing.T, s *Store, src string, id LayerID) {
	t.Helper()
	want := view(t, src)
	if s.Rootless() {
		for p, v := range want {
			want[p] = strings.Replace(v, "uid=0 gid=0", fmt.Sprintf("uid=%d gid=%d", s.uid, s.gid), 1)
		}
	}
	diffViews(t, want, view(t, s.TreePath(id)))
}

func TestConcurrentCommits(t *testing.T) {
	s := newStore(t)
	src := t.TempDir()
	nodes := sampleTree()
	for i := range 200 {
		nodes[fmt.Sprintf("many/f%03d", i)] = node{content: fmt.Sprintf("file %d\n", i%50)}
	}
	writeTree(t, src, nodes)
	const n = 16
	ids := make([]LayerID, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// Half of them through a second Store value, like a second process.
			st := s
			if i%2 == 1 {
				var err error
				if st, err = Open(s.Root()); err != nil {
					errs[i] = err
					return
				}
			}
			ids[i], errs[i] = st.CommitDir(context.Background(), src, CommitOptions{Ref: fmt.Sprintf("env/c%d", i)})
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("commit %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("commit %d gave %s, commit 0 gave %s", i, ids[i], ids[0])
		}
	}
	ents, _ := os.ReadDir(s.path("layers"))
	if len(ents) != 1 {
		t.Errorf("layers/ holds %d entries, want 1", len(ents))
	}
	if c := countFiles(t, s.path("tmp")); c != 0 {
		t.Errorf("tmp holds %d files", c)
	}
	checkView(t, s, src, ids[0])
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Fatalf("verify: %v %v", err, r.Problems)
	}
}

func TestRefs(t *testing.T) {
	s := newStore(t)
	src := t.TempDir()
	writeTree(t, src, map[string]node{"f": {content: "1"}})
	id, err := s.CommitDir(t.Context(), src, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"env/abc123", true},
		{"repo/django@0a1b2c", true},
		{"env", true},
		{"base/python:3.11,x=y~1+2", true},
		{"", false},
		{"/abs", false},
		{"a//b", false},
		{"a/../b", false},
		{"a/./b", false},
		{"trailing/", false},
		{"sp ace", false},
		{"pct%2F", false},
		{strings.Repeat("x", 201), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.SetRef(t.Context(), tc.name, id)
			if tc.ok != (err == nil) {
				t.Fatalf("SetRef(%q): %v, want ok=%v", tc.name, err, tc.ok)
			}
			if !tc.ok && !errors.Is(err, ErrBadRef) {
				t.Fatalf("SetRef(%q): %v, want ErrBadRef", tc.name, err)
			}
			if tc.ok {
				if got, err := s.Ref(tc.name); err != nil || got != id {
					t.Fatalf("Ref(%q) = %s, %v", tc.name, got, err)
				}
			}
		})
	}
	refs, err := s.Refs()
	if err != nil || len(refs) != 4 || refs[0].Name != "base/python:3.11,x=y~1+2" {
		t.Fatalf("Refs = %v, %v", refs, err)
	}
	if err := s.DeleteRef("env"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ref("env"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted ref: %v", err)
	}
	if _, err := s.Ref("env/abc123"); err != nil {
		t.Fatalf("deleting env removed env/abc123: %v", err)
	}
	if err := s.SetRef(t.Context(), "env/missing", LayerID(DigestOf([]byte("nope")))); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ref to a missing layer: %v", err)
	}
}

func TestVerifyNamesCorruptObjectAndLayers(t *testing.T) {
	s := newStore(t)
	shared := strings.Repeat("shared content\n", 100)
	var ids []LayerID
	for i, nodes := range []map[string]node{
		{"a/shared.txt": {content: shared}, "a/one": {content: "1"}},
		{"b/shared-too.txt": {content: shared}, "b/two": {content: "2"}},
		{"c/other": {content: "3"}},
	} {
		src := t.TempDir()
		writeTree(t, src, nodes)
		id, err := s.CommitDir(t.Context(), src, CommitOptions{Ref: fmt.Sprintf("l/%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Fatalf("verify before: %v %v", err, r.Problems)
	}
	d := DigestOf([]byte(shared))
	f, err := os.OpenFile(s.objectPath(d), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	f.ReadAt(b, 700)
	b[0] ^= 0x01
	f.WriteAt(b, 700)
	f.Close()

	r, err := s.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, p := range r.Problems {
		if p.Kind != CorruptObject {
			continue
		}
		found = true
		if p.Digest != d {
			t.Errorf("corrupt object %s, want %s", p.Digest, d)
		}
		want := []LayerID{ids[0], ids[1]}
		if ids[1].String() < ids[0].String() {
			want = []LayerID{ids[1], ids[0]}
		}
		if fmt.Sprint(p.Layers) != fmt.Sprint(want) {
			t.Errorf("layers %v, want %v", p.Layers, want)
		}
		if !strings.Contains(p.String(), d.Hex()) {
			t.Errorf("problem text does not name the object: %s", p)
		}
	}
	if !found {
		t.Fatalf("no corrupt-object problem in %v", r.Problems)
	}
	for _, p := range r.Problems {
		for _, l := range p.Layers {
			if l == ids[2] {
				t.Errorf("problem blames the unrelated layer: %s", p)
			}
		}
	}
}
