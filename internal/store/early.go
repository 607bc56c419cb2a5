package store

import (
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
	// until Compact makes it cold once no lease holds it).
	Trees func(trees []string)
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

// earlyTree builds layer id's tree (manifest m) in a temp dir of layers/
// before its new content is published: a file whose content is pending
// (byKey: an inode key's temp file; byDigest: a temp file of that
// content) is a hard link to that temp file, or a copy of it with the
// entry's metadata; one whose content the store has, a link into the
// inode pool. It adds to b what a crash could lose of the tree and
// returns the temp dir; "" when the layer's tree is in place already.
func (s *Store) earlyTree(ctx context.Context, id LayerID, m *Manifest, byKey map[inodeKey]string, byDigest map[Digest]string, b *barrier) (string, error) {
	if _, err := os.Lstat(s.TreePath(id)); err == nil {
		return "", nil
	}
	tmpDir, err := os.MkdirTemp(s.path("layers"), ".tmp-"+id.Short()+"-")
	if err != nil {
		return "", err
	}
	dst := filepath.Join(tmpDir, "tree")
	var leaves []int
	for i := range m.Entries {
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
		return s.earlyFile(ctx, dst, e, byKey, byDigest, b)
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
// earlyTree).
func (s *Store) earlyFile(ctx context.Context, root string, e *Entry, byKey map[inodeKey]string, byDigest map[Digest]string, b *barrier) error {
	p := filepath.Join(root, e.Path)
	key := s.keyOf(e)
	src, pending := byKey[key]
	if !pending {
		if tmp, ok := byDigest[e.Digest]; ok {
			// Pending content, another entry's metadata: a copy.
			b.add(p)
			return s.copyInode(ctx, tmp, p, e)
		}
		if err := s.ensureInode(ctx, key); err != nil {
			return err
		}
		src = s.inodePath(key)
	}
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

// earlyTrees builds the early tree of each of layers (their new content
// pending, written to temp files) into trees, adding what a crash could
// lose of them to b, and calls early with their paths.
func (s *Store) earlyTrees(ctx context.Context, layers []*Staged, pending []pendingObject, trees []string, b *barrier, early func([]string)) error {
	byKey, byDigest := map[inodeKey]string{}, map[Digest]string{}
	for _, p := range pending {
		if p.key != nil {
			byKey[*p.key] = p.tmp
		}
		byDigest[p.digest] = p.tmp
	}
	paths := make([]string, len(layers))
	for i, l := range layers {
		t, err := s.earlyTree(ctx, l.ID, l.m, byKey, byDigest, b)
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
