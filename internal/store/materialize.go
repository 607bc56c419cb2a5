package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// Materialize makes sure the layer's tree exists, building it from the
// manifest and objects when it does not, and returns its path. The tree is
// built in a temp directory beside the final one, synced and renamed into
// place, so it is either complete or absent.
func (s *Store) Materialize(ctx context.Context, id LayerID) (string, error) {
	unlock, err := s.lock(ctx, false)
	if err != nil {
		return "", err
	}
	defer unlock()
	if s.materialized(id) {
		s.touchUsed(id)
		return s.TreePath(id), nil
	}
	m, err := s.Manifest(id)
	if err != nil {
		return "", err
	}
	return s.materialize(ctx, id, m)
}

// materialize builds the layer's tree (see Materialize) with the store
// lock held. The tree's rename is not synced: the tree is a cache of the
// manifest and objects, made again if a crash loses the rename (its temp
// dir is then garbage).
func (s *Store) materialize(ctx context.Context, id LayerID, m *Manifest) (string, error) {
	b := s.newBarrier()
	tmpDir, err := s.prepareTree(ctx, id, m, b)
	if err != nil {
		return "", err
	}
	if err := b.flush(); err != nil {
		if tmpDir != "" {
			s.removeTree(tmpDir)
		}
		return "", err
	}
	if err := s.placeTree(id, tmpDir); err != nil {
		return "", err
	}
	return s.TreePath(id), nil
}

// prepareTree builds the layer's tree in a temp dir beside its place,
// adding what a crash could lose of it to b, and returns the temp dir; ""
// when the layer is present already. placeTree puts it in place once b is
// flushed.
func (s *Store) prepareTree(ctx context.Context, id LayerID, m *Manifest, b *barrier) (string, error) {
	if s.materialized(id) {
		return "", nil
	}
	if _, err := s.thaw(ctx, m); err != nil {
		return "", fmt.Errorf("materializing layer %s: %w", id.Short(), err)
	}
	if err := s.ensureInodes(ctx, m); err != nil {
		return "", fmt.Errorf("materializing layer %s: %w", id.Short(), err)
	}
	tmpDir, err := os.MkdirTemp(s.path("layers"), ".tmp-"+id.Short()+"-")
	if err != nil {
		return "", err
	}
	if err := s.buildTree(ctx, filepath.Join(tmpDir, "tree"), m, b); err != nil {
		s.removeTree(tmpDir)
		return "", fmt.Errorf("materializing layer %s: %w", id.Short(), err)
	}
	b.add(tmpDir)
	return tmpDir, nil
}

// placeTree renames a tree prepareTree built (tmpDir; "" when the layer
// was present) into place, and marks the layer used.
func (s *Store) placeTree(id LayerID, tmpDir string) error {
	if tmpDir != "" {
		if err := os.Rename(tmpDir, s.layerDir(id)); err != nil {
			if !errors.Is(err, fs.ErrExist) && !errors.Is(err, unix.ENOTEMPTY) {
				s.removeTree(tmpDir)
				return fmt.Errorf("materializing layer %s: %w", id.Short(), err)
			}
			// Someone else materialized it first (theirs is as good), or
			// it is compacted: its directory is there without a tree.
			err = os.Rename(filepath.Join(tmpDir, "tree"), s.TreePath(id))
			s.removeTree(tmpDir)
			if err != nil && !errors.Is(err, fs.ErrExist) && !errors.Is(err, unix.ENOTEMPTY) {
				return fmt.Errorf("materializing layer %s: %w", id.Short(), err)
			}
			os.Remove(filepath.Join(s.layerDir(id), compactedFile))
		}
	}
	s.touchUsed(id)
	return nil
}

// ensureInodes makes every inode the manifest's files need.
func (s *Store) ensureInodes(ctx context.Context, m *Manifest) error {
	seen := map[inodeKey]bool{}
	var keys []inodeKey
	for i := range m.Entries {
		if e := &m.Entries[i]; e.Type == TypeFile {
			if k := s.keyOf(e); !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	return parallel(ctx, s.workers, len(keys), func(ctx context.Context, i int) error {
		return s.ensureInode(ctx, keys[i])
	})
}

// parallel runs fn(i) for i in [0, n) on up to workers goroutines and
// returns the first error; after an error the remaining calls are skipped.
func parallel(ctx context.Context, workers, n int, fn func(ctx context.Context, i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(workers, 1))
	for i := range n {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			return fn(gctx, i)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err() // the caller's: the group's ends when Wait returns
}

// ApplyLayers writes the layers, bottom first, onto dst as one merged
// tree of real files (copy mode, for hosts without overlayfs): each
// layer's deletions remove, its opaque directories are emptied first, its
// files are copies (copy_file_range, which clones where the filesystem
// can) with their metadata, so that writes to dst never reach the store.
// Devices and fifos are made where the caller may make them and left out
// otherwise. The layers' inodes are made first if missing.
func (s *Store) ApplyLayers(ctx context.Context, dst string, bottomFirst []LayerID) error {
	for _, id := range bottomFirst {
		m, err := s.Manifest(id)
		if err != nil {
			return err
		}
		if err := s.ensureInodes(ctx, m); err != nil {
			return fmt.Errorf("applying layer %s: %w", id.Short(), err)
		}
		if err := s.writeTree(ctx, dst, m, nil); err != nil {
			return fmt.Errorf("applying layer %s: %w", id.Short(), err)
		}
	}
	return nil
}

// buildTree creates the tree of m at dst as the layer's own tree (an
// overlay lower dir): files hard-linked to the inode pool, whiteouts and
// opaque markers kept. What a crash could lose is added to b.
func (s *Store) buildTree(ctx context.Context, dst string, m *Manifest, b *barrier) error {
	return s.writeTree(ctx, dst, m, b)
}

// writeTree writes the entries of m under dst: directories first
// (writable, so that an unprivileged caller can fill them), then everything
// else in parallel, then directory metadata bottom-up. With b nil it
// merges onto an existing tree (ApplyLayers); otherwise dst is new, the
// layer's own tree is made (buildTree) and what a crash could lose of it
// is added to b.
func (s *Store) writeTree(ctx context.Context, dst string, m *Manifest, b *barrier) error {
	merge := b == nil
	var leaves []int
	for i := range m.Entries {
		e := &m.Entries[i]
		if e.Type != TypeDir {
			leaves = append(leaves, i)
			continue
		}
		p := filepath.Join(dst, e.Path)
		if merge {
			if err := mergeDir(p, e.Opaque); err != nil {
				return err
			}
			continue
		}
		if err := os.Mkdir(p, 0o700); err != nil {
			return err
		}
	}
	var copied atomic.Int64
	err := parallel(ctx, s.workers, len(leaves), func(ctx context.Context, i int) error {
		if merge {
			return s.mergeLeaf(ctx, dst, &m.Entries[leaves[i]])
		}
		return s.makeLeaf(ctx, dst, &m.Entries[leaves[i]], &copied, b)
	})
	if err != nil {
		return err
	}
	if n := copied.Load(); n > 0 {
		s.log.Warn("store: hard links into the inode pool failed; files were copied instead (uses more disk)",
			"files", n, "store", s.root)
	}
	s.logSkippedXattrs(m)
	for i := len(m.Entries) - 1; i >= 0; i-- {
		if e := m.Entries[i]; e.Type == TypeDir {
			e.Opaque = e.Opaque && !merge // a merged tree has no overlay markers
			p := filepath.Join(dst, e.Path)
			if err := s.setMeta(p, &e); err != nil {
				return err
			}
			if !merge {
				b.add(p)
			}
		}
	}
	return nil
}

// logSkippedXattrs says which of m's extended attributes the store could
// not set: in a rootless store, file capabilities and trusted.* ones.
func (s *Store) logSkippedXattrs(m *Manifest) {
	n, first := 0, ""
	for i := range m.Entries {
		if _, skipped := s.applicable(&m.Entries[i]); skipped > 0 {
			if n == 0 {
				first = m.Entries[i].Path
			}
			n += skipped
		}
	}
	if n > 0 {
		s.log.Warn("store: extended attributes not set (a rootless store sets only user.* ones, on files and directories)",
			"count", n, "first", first, "store", s.root)
	}
}

// mergeDir makes p a writable directory over what a lower layer left
// there: a non-directory is replaced, an opaque directory emptied.
func mergeDir(p string, opaque bool) error {
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return os.Mkdir(p, 0o700)
	case err != nil:
		return err
	case !fi.IsDir():
		if err := os.Remove(p); err != nil {
			return err
		}
		return os.Mkdir(p, 0o700)
	}
	if err := os.Chmod(p, 0o700); err != nil {
		return err
	}
	if opaque {
		ents, err := os.ReadDir(p)
		if err != nil {
			return err
		}
		for _, x := range ents {
			if err := removeAllWritable(filepath.Join(p, x.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// mergeLeaf writes one non-directory entry over what a lower layer left.
func (s *Store) mergeLeaf(ctx context.Context, root string, e *Entry) error {
	p := filepath.Join(root, e.Path)
	if err := removeAllWritable(p); err != nil {
		return err
	}
	switch e.Type {
	case TypeDelete:
		return nil // the removal is the entry
	case TypeFile:
		if s.budget != nil {
			if err := s.budget.Acquire(ctx, e.Size); err != nil {
				return err
			}
			defer s.budget.Release(e.Size)
		}
		key := s.keyOf(e)
		return s.copyFile(ctx, s.inodePath(key), p, &key)
	case TypeSymlink:
		if err := unix.Symlink(e.Target, p); err != nil {
			return fmt.Errorf("symlink %s: %w", e.Path, err)
		}
		return s.setMeta(p, e)
	default:
		// Devices and fifos: made where the caller may (root), left out
		// otherwise; sandboxes bind-mount /dev anyway.
		typ := uint32(unix.S_IFIFO)
		switch e.Type {
		case TypeChar:
			typ = unix.S_IFCHR
		case TypeBlock:
			typ = unix.S_IFBLK
		}
		if unix.Mknod(p, typ|e.Mode&0o7777, int(unix.Mkdev(e.Major, e.Minor))) != nil {
			return nil
		}
		return s.setMeta(p, e)
	}
}

// copyFile copies src to a new file dst with key's metadata.
func (s *Store) copyFile(ctx context.Context, src, dst string, key *inodeKey) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil { // copy_file_range where the kernel can
		out.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if err := s.setFileMeta(out, key); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// removeAllWritable removes p, making read-only directories under it
// writable first where that is what stops an unprivileged caller.
func removeAllWritable(p string) error {
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := os.RemoveAll(p); err == nil {
		return nil
	}
	filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}

// makeLeaf makes one non-directory entry of a layer's tree. A hard link
// to the pool needs nothing more than its directory's fsync to survive a
// crash; a copy needs its own; other inodes cannot be fsynced by
// themselves, so they need b's syncfs.
func (s *Store) makeLeaf(ctx context.Context, root string, e *Entry, copied *atomic.Int64, b *barrier) error {
	p := filepath.Join(root, e.Path)
	if e.Type != TypeFile {
		b.addWhole()
	}
	switch e.Type {
	case TypeFile:
		src := s.inodePath(s.keyOf(e))
		link := os.Link
		if s.hooks.link != nil {
			link = s.hooks.link
		}
		err := link(src, p)
		if err == nil {
			return nil
		}
		// Cross-device, too many links, or a filesystem without hard links.
		if !errors.Is(err, unix.EXDEV) && !errors.Is(err, unix.EMLINK) && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.ENOTSUP) {
			return fmt.Errorf("linking %s to inode %s: %w", e.Path, src, err)
		}
		copied.Add(1)
		b.add(p)
		return s.copyInode(ctx, src, p, e)
	case TypeSymlink:
		if err := unix.Symlink(e.Target, p); err != nil {
			return fmt.Errorf("symlink %s: %w", e.Path, err)
		}
	case TypeChar, TypeBlock:
		if s.rootless {
			// An unprivileged user cannot make devices: an empty file stands
			// in (sandboxes bind-mount /dev anyway).
			f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			f.Close()
			break
		}
		typ := uint32(unix.S_IFCHR)
		if e.Type == TypeBlock {
			typ = unix.S_IFBLK
		}
		if err := unix.Mknod(p, typ|e.Mode&0o777, int(unix.Mkdev(e.Major, e.Minor))); err != nil {
			return fmt.Errorf("mknod %s: %w", e.Path, err)
		}
	case TypeFifo:
		if err := unix.Mkfifo(p, e.Mode&0o777); err != nil {
			return fmt.Errorf("mkfifo %s: %w", e.Path, err)
		}
	case TypeDelete:
		// An overlay whiteout; unprivileged users may make them too.
		if err := unix.Mknod(p, unix.S_IFCHR, 0); err != nil {
			return fmt.Errorf("making whiteout %s: %w", e.Path, err)
		}
		return nil
	}
	return s.setMeta(p, e)
}

// setMeta applies owner, mode, opaque marker and mtime to a non-file entry.
func (s *Store) setMeta(p string, e *Entry) error {
	if e.Opaque {
		if !s.rootless {
			if err := unix.Lsetxattr(p, "trusted.overlay.opaque", []byte("y"), 0); err != nil {
				return fmt.Errorf("marking %s opaque: %w", e.Path, err)
			}
		}
		if err := unix.Lsetxattr(p, "user.overlay.opaque", []byte("y"), 0); err != nil {
			return fmt.Errorf("marking %s opaque: %w", e.Path, err)
		}
	}
	if !s.rootless {
		if err := unix.Lchown(p, int(e.UID), int(e.GID)); err != nil {
			return fmt.Errorf("chown %s: %w", e.Path, err)
		}
	}
	if e.Type != TypeSymlink {
		if err := unix.Chmod(p, e.Mode); err != nil {
			return fmt.Errorf("chmod %s: %w", e.Path, err)
		}
	}
	if xs, _ := s.applicable(e); len(xs) > 0 {
		if err := s.setXattrs(p, xs); err != nil {
			return err
		}
	}
	if e.Mtime != 0 {
		ts := []unix.Timespec{unix.NsecToTimespec(e.Mtime), unix.NsecToTimespec(e.Mtime)}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("setting mtime of %s: %w", e.Path, err)
		}
	}
	return nil
}

// copyInode is the fallback when a tree cannot hard-link into the pool.
func (s *Store) copyInode(ctx context.Context, src, dst string, e *Entry) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	key := s.keyOf(e)
	p, err := s.writeTemp(ctx, in, e.Size, e.Digest, &key, false)
	if err != nil {
		return fmt.Errorf("copying %s: %w", e.Path, err)
	}
	if err := os.Rename(p.tmp, dst); err != nil {
		os.Remove(p.tmp)
		// tmp/ and the tree may be on different filesystems too.
		if !errors.Is(err, unix.EXDEV) {
			return err
		}
		return s.copyAcross(ctx, src, dst, key)
	}
	return nil
}

// copyAcross copies src to a new file dst directly, for a tree on another
// filesystem than the store's tmp dir.
func (s *Store) copyAcross(ctx context.Context, src, dst string, key inodeKey) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	h := sha256.New()
	if _, err := copyHashing(ctx, out, h, in); err != nil {
		out.Close()
		return err
	}
	if Digest(h.Sum(nil)) != key.digest {
		out.Close()
		return fmt.Errorf("copying %s: %w", src, ErrDigestMismatch)
	}
	if err := s.setFileMeta(out, &key); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// removeTree removes a directory tree, making read-only directories
// writable first when that is what stops an unprivileged caller.
func (s *Store) removeTree(dir string) error { return removeAllWritable(dir) }
