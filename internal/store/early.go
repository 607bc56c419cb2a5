package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Early trees. A layer's tree is what a sandbox mounts; it needs the
// layer's files, not the store's barriers. PublishLeasedEarly builds the
// trees of the layers it publishes before the barriers, from the content
// in its temp files (each new object's temp file is the inode its
// entries link, as it is once published), hands their paths to its
// caller, and only then makes the layers durable and visible. An early
// tree is built where prepareTree builds one (a temp dir of layers/,
// which gc removes and verify ignores), so a crash leaves what it left
// before; once the barriers are passed, and the caller says nothing
// looks its path up any more, it is renamed into its place. A mount of
// it made before follows it there.

// Early is what PublishLeasedEarly tells its caller, and asks of it.
type Early struct {
	// Trees is called once each layer's tree is complete (trees[i] is
	// layers[i]'s), before anything of the layers is durable or
	// visible: in a temp dir, or in its place when the layer was
	// present. What mounts a tree from there keeps it, also when
	// another commit of the same layer put its own in place first (then
	// the early tree stays in the layer's dir, as long as the layer or
	// until Compact makes it cold once no lease holds it). The layers
	// are hashed once it returns: a caller that wants the CPUs first
	// (a fork's spares reset onto the tree) returns later.
	Trees func(trees []string)
	// Hashed, when not nil, is called once the layers are hashed: their
	// IDs and manifests are known from then on. A layer staged to hash
	// later (CommitOptions.HashLater) is hashed after Trees, from the
	// content its tree was built of: what mounts the tree waits for no
	// hash; other layers are hashed when staged.
	Hashed func()
	// Place, when not nil, is called once the layers are durable, before
	// the trees are renamed into their place, or, should the publication
	// fail after Trees, before the trees are removed: it returns once
	// nothing looks their paths up any more (a mount in flight).
	Place func()
}

// PublishLeasedEarly is PublishLeased with early's calls (see Early). If
// the publication fails, the early trees are removed and the error
// returned.
func (s *Store) PublishLeasedEarly(ctx context.Context, ref string, early Early, layers ...*Staged) (*Lease, error) {
	unlock, err := s.lock(ctx, false)
	if err != nil {
		for _, l := range layers {
			l.Discard()
		}
		return nil, err
	}
	defer unlock()
	if err := s.publishLayers(ctx, ref, &early, layers...); err != nil {
		return nil, err
	}
	ids := make([]LayerID, len(layers))
	for i, l := range layers {
		ids[i] = l.ID
	}
	return s.Lease(ctx, ids...)
}

// pendingContent is where an early tree finds the content of its layer's
// files that is not in the store yet: temp files by inode key and by
// digest (content hashed when staged), and by entry (not hashed yet:
// CommitOptions.HashLater).
type pendingContent struct {
	byKey    map[inodeKey]string
	byDigest map[Digest]string
	byEntry  map[int]string
}

// earlyTree builds the tree of layer l (its manifest unsorted while it is
// not hashed) in a temp dir of layers/ before its new content is
// published: a file whose content is pending is a hard link to its temp
// file, or a copy of it with the entry's metadata; one whose content the
// store has, a link into the inode pool. It adds to b what a crash could
// lose of the tree and returns the temp dir; "" when the layer's tree is
// in place already.
func (s *Store) earlyTree(ctx context.Context, l *Staged, pc pendingContent, b *barrier) (string, error) {
	id, m, name := l.ID, l.m, "early"
	if !l.unhashed {
		if _, err := os.Lstat(s.TreePath(id)); err == nil {
			return "", nil
		}
		name = id.Short()
	}
	tmpDir, err := os.MkdirTemp(s.path("layers"), ".tmp-"+name+"-")
	if err != nil {
		return "", err
	}
	dst := filepath.Join(tmpDir, "tree")
	var leaves []int
	for i := range m.Entries { // a directory before what it holds, sorted or as walked
		e := &m.Entries[i]
		if e.Type != TypeDir {
			leaves = append(leaves, i)
			continue
		}
		if err := os.Mkdir(filepath.Join(dst, e.Path), 0o700); err != nil {
			s.removeTree(tmpDir)
			return "", err
		}
	}
	var copied atomic.Int64
	err = parallel(ctx, s.workers, len(leaves), func(ctx context.Context, i int) error {
		e := &m.Entries[leaves[i]]
		if e.Type != TypeFile {
			return s.makeLeaf(ctx, dst, e, &copied, b)
		}
		return s.earlyFile(ctx, dst, e, pc.byEntry[leaves[i]], pc, b)
	})
	if err == nil {
		for i := len(m.Entries) - 1; i >= 0 && err == nil; i-- {
			if e := m.Entries[i]; e.Type == TypeDir {
				p := filepath.Join(dst, e.Path)
				err = s.setMeta(p, &e)
				b.add(p)
			}
		}
	}
	if err != nil {
		s.removeTree(tmpDir)
		return "", fmt.Errorf("materializing layer %s: %w", id.Short(), err)
	}
	b.add(tmpDir)
	return tmpDir, nil
}

// earlyFile makes file entry e of an early tree under root (see
// earlyTree); unhashed, when not "", is the temp file of its content not
// hashed yet, with its metadata but its xattrs (writeUnhashed).
func (s *Store) earlyFile(ctx context.Context, root string, e *Entry, unhashed string, pc pendingContent, b *barrier) error {
	p := filepath.Join(root, e.Path)
	if unhashed != "" {
		if len(e.Xattrs) > 0 {
			b.add(p)
			return s.copyInode(ctx, unhashed, p, e)
		}
		return s.linkInode(ctx, unhashed, p, e, b)
	}
	key := s.keyOf(e)
	src, pending := pc.byKey[key]
	if !pending {
		if tmp, ok := pc.byDigest[e.Digest]; ok {
			// Pending content, another entry's metadata: a copy.
			b.add(p)
			return s.copyInode(ctx, tmp, p, e)
		}
		if err := s.ensureInode(ctx, key); err != nil {
			return err
		}
		src = s.inodePath(key)
	}
	return s.linkInode(ctx, src, p, e, b)
}

// linkInode makes p, entry e of an early tree, a hard link to src, or
// where a link cannot be made, a copy (added to b).
func (s *Store) linkInode(ctx context.Context, src, p string, e *Entry, b *barrier) error {
	err := os.Link(src, p)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EXDEV) && !errors.Is(err, unix.EMLINK) && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.ENOTSUP) {
		return fmt.Errorf("linking %s to %s: %w", e.Path, src, err)
	}
	b.add(p)
	return s.copyInode(ctx, src, p, e)
}

// placeEarlyTree renames an early tree (tmpDir) into layer id's place.
// When another commit of the layer put its tree there first, the early
// tree, which may be mounted, is not removed: it moves into the layer's
// dir, and goes with the layer, or when Compact makes the layer cold (what
// mounts it holds a lease on the layer).
func (s *Store) placeEarlyTree(id LayerID, tmpDir string) error {
	taken := func(err error) bool { return errors.Is(err, fs.ErrExist) || errors.Is(err, unix.ENOTEMPTY) }
	err := os.Rename(tmpDir, s.layerDir(id))
	if taken(err) { // the layer's dir, with or without its tree
		if err = os.Rename(filepath.Join(tmpDir, "tree"), s.TreePath(id)); taken(err) {
			var rnd [6]byte
			rand.Read(rnd[:])
			err = os.Rename(tmpDir, filepath.Join(s.layerDir(id), earlyPrefix+hex.EncodeToString(rnd[:])))
		} else if err == nil {
			os.Remove(tmpDir)
		}
	}
	if err != nil {
		return fmt.Errorf("materializing layer %s: %w", id.Short(), err)
	}
	s.touchUsed(id)
	return nil
}

// earlyPrefix names an early tree kept in its layer's dir (placeEarlyTree).
const earlyPrefix = "early-"

// earlyTrees writes what layers hold in memory to temp files (content
// not hashed yet with its entry's metadata: writeUnhashed), builds each
// layer's early tree from them into trees, adding what a crash could
// lose of them to b, and calls early with their paths.
func (s *Store) earlyTrees(ctx context.Context, layers []*Staged, trees []string, b *barrier, early func([]string)) error {
	pc := make([]pendingContent, len(layers))
	byKey, byDigest := map[inodeKey]string{}, map[Digest]string{}
	for i, l := range layers {
		if err := s.writeUnhashed(ctx, l); err != nil {
			return fmt.Errorf("publishing: %w", err)
		}
		if err := s.writeHeld(ctx, l.pending); err != nil {
			return fmt.Errorf("publishing: %w", err)
		}
		pc[i] = pendingContent{byKey: byKey, byDigest: byDigest, byEntry: map[int]string{}}
		for _, p := range l.pending {
			switch {
			case p.unhashed:
				pc[i].byEntry[p.entry] = p.tmp
			case p.key != nil:
				byKey[*p.key] = p.tmp
				fallthrough
			default:
				byDigest[p.digest] = p.tmp
			}
		}
	}
	paths := make([]string, len(layers))
	for i, l := range layers {
		t, err := s.earlyTree(ctx, l, pc[i], b)
		if err != nil {
			return err
		}
		trees[i], paths[i] = t, s.TreePath(l.ID)
		if t != "" {
			paths[i] = filepath.Join(t, "tree")
		}
	}
	early(paths)
	return nil
}

// writeUnhashed writes the content l holds and has not hashed yet
// (CommitOptions.HashLater) to temp files, in parallel, each with its
// entry's metadata but its xattrs (its inode key's once hashed), and
// keeps holding it: hashHeld then hashes it from memory, and the early
// tree, built before, links those files.
func (s *Store) writeUnhashed(ctx context.Context, l *Staged) error {
	var todo []int
	for i, p := range l.pending {
		if p.unhashed && p.tmp == "" {
			todo = append(todo, i)
		}
	}
	return parallel(ctx, s.workers, len(todo), func(ctx context.Context, k int) error {
		p := &l.pending[todo[k]]
		key := s.keyOf(&l.m.Entries[p.entry]).withoutXattrs() // its digest is set once hashed
		w, err := s.writeTempFrom(ctx, bytes.NewReader(p.held), int64(len(p.held)), Digest{}, true, &key, false)
		if err != nil {
			return fmt.Errorf("%s: %w", l.m.Entries[p.entry].Path, err)
		}
		p.tmp = w.tmp
		return nil
	})
}
