package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// CommitOptions tune CommitDir.
type CommitOptions struct {
	// Parents are the layers the directory was built on, topmost first
	// (e.g. the base for an environment layer).
	Parents []LayerID
	// Ref, when set, is pointed at the new layer before CommitDir returns,
	// so that a concurrent GC cannot remove it in between.
	Ref string
	// KeepMtime records modification times. Identical files then share an
	// inode only when their times match too, so dedup across builds drops;
	// leave it off unless something depends on times (e.g. .pyc files
	// validated by source mtime).
	KeepMtime bool
	// MapOwner maps the owner found on disk to the owner recorded in the
	// manifest (e.g. a rootless builder's own uid to 0). Nil keeps it.
	MapOwner func(uid, gid uint32) (uint32, uint32)
	// HoldBytes lets StageDir keep the new content of files up to 1 MiB
	// in memory, up to about this many bytes in all, instead of writing
	// it to temp files while the source is read: Staged.WriteOut or
	// Publish writes it. A caller that stopped the source's writers for
	// the stage lets them go on sooner. 0 holds nothing.
	HoldBytes int64
	// HashLater leaves the content StageDir holds (HoldBytes) unhashed
	// until Staged.WriteOut, which hashes it as it writes it out, so
	// that the stage only reads it and lets the source's writers go on
	// sooner still. The stage's ID and Manifest are then known once
	// WriteOut returned: call it before reading them or staging a layer
	// above (Publish calls it).
	HashLater bool
	// NoWriteback has Staged.WriteOut write the held content to temp
	// files without starting their writeback to disk: for a caller that
	// waits for WriteOut itself (a fork's children mount the layer's
	// early tree once it returned, PublishLeasedEarly) while the
	// publication's barrier comes later, off its path. On a busy disk a
	// writeback start blocks on the device's full queue (docs/bench.md,
	// session 16); the barrier fsyncs the content either way.
	NoWriteback bool
	// CopyNow, with HashLater, has StageDir copy each file's new
	// content to a temp file with its entry's metadata (a copy in the
	// kernel, not a read into memory), in place of holding it, and
	// hash it later from there: for a caller that builds an early tree
	// of those files (PublishLeasedEarly) and lets the source's writers
	// go on once they are copied.
	CopyNow bool
}

// smallFile is the size up to which a file is read into memory once, for
// both hashing and writing.
const smallFile = 1 << 20

// CommitDir turns a directory tree into a layer: it hashes every file, stores
// new content as objects, writes the manifest and materializes the layer.
// The same tree always gives the same LayerID.
//
// dir may be an overlayfs upper dir: whiteouts (character devices 0/0, or
// empty files with a trusted.overlay.whiteout or user.overlay.whiteout
// xattr) become deletion entries and opaque directories (overlay.opaque "y")
// opaque entries. Upper dirs made with redirect_dir or metacopy are refused
// (ErrUnsupportedOverlay). Sockets are skipped. dir must not change while it
// is read, which is StageDir, the commit's first half (Publish is the
// second); a file that changes is reported as ErrSizeMismatch or
// ErrDigestMismatch.
func (s *Store) CommitDir(ctx context.Context, dir string, opts CommitOptions) (LayerID, error) {
	ref := opts.Ref
	if ref != "" {
		if err := validRef(ref); err != nil {
			return LayerID{}, fmt.Errorf("committing %s: %w", dir, err)
		}
	}
	opts.Ref = ""
	st, err := s.StageDir(ctx, dir, opts)
	if err != nil {
		return LayerID{}, err
	}
	id := st.ID
	if err := s.Publish(ctx, ref, st); err != nil {
		return id, fmt.Errorf("committing %s: %w", dir, err)
	}
	return id, nil
}

// walker lists a directory tree as manifest entries.
type walker struct {
	log  *slog.Logger
	opts CommitOptions
	root string

	entries []Entry
	srcs    map[int]string // entry index -> source path, for files
}

func (w *walker) walk(ctx context.Context) error {
	w.srcs = make(map[int]string)
	var st unix.Stat_t
	if err := unix.Lstat(w.root, &st); err != nil {
		return fmt.Errorf("stat %s: %w", w.root, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s is not a directory", w.root)
	}
	return w.dir(ctx, w.root, ".", &st)
}

// dir adds the directory at path (entry rel, already stat'ed) and walks it.
func (w *walker) dir(ctx context.Context, path, rel string, st *unix.Stat_t) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e := w.meta(rel, TypeDir, st)
	opaque, err := dirOpaque(path)
	if err != nil {
		return err
	}
	e.Opaque = opaque
	w.entries = append(w.entries, e)

	f, err := os.Open(path)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		f.Close()
		return fmt.Errorf("reading directory %s: %w", path, err)
	}
	fd := int(f.Fd())
	slices.Sort(names)
	var subdirs []string
	var subStats []unix.Stat_t
	for _, name := range names {
		var cst unix.Stat_t
		if err := unix.Fstatat(fd, name, &cst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			f.Close()
			return fmt.Errorf("stat %s: %w", filepath.Join(path, name), err)
		}
		cpath := filepath.Join(path, name)
		crel := name
		if rel != "." {
			crel = rel + "/" + name
		}
		if cst.Mode&unix.S_IFMT == unix.S_IFDIR {
			subdirs = append(subdirs, name)
			subStats = append(subStats, cst)
			continue
		}
		if err := w.leaf(fd, name, cpath, crel, &cst); err != nil {
			f.Close()
			return err
		}
	}
	f.Close()
	for i, name := range subdirs {
		crel := name
		if rel != "." {
			crel = rel + "/" + name
		}
		if err := w.dir(ctx, filepath.Join(path, name), crel, &subStats[i]); err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) leaf(dirfd int, name, path, rel string, st *unix.Stat_t) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if st.Size == 0 {
			wh, err := xattrWhiteout(path)
			if err != nil {
				return err
			}
			if wh {
				w.entries = append(w.entries, Entry{Path: rel, Type: TypeDelete})
				return nil
			}
		} else if st.Blocks == 0 {
			// Metacopy upper files hold metadata only; sparse files are
			// fine, so look before refusing.
			if mc, err := hasOverlayXattr(path, "metacopy"); err != nil {
				return err
			} else if mc {
				return fmt.Errorf("%w: %s is a metacopy file", ErrUnsupportedOverlay, path)
			}
		}
		e := w.meta(rel, TypeFile, st)
		e.Size = st.Size
		w.srcs[len(w.entries)] = path
		w.entries = append(w.entries, e)
	case unix.S_IFLNK:
		buf := make([]byte, max(st.Size+1, 256))
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return fmt.Errorf("readlink %s: %w", path, err)
		}
		e := w.meta(rel, TypeSymlink, st)
		e.Target = string(buf[:n])
		w.entries = append(w.entries, e)
	case unix.S_IFCHR, unix.S_IFBLK:
		if st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0 {
			w.entries = append(w.entries, Entry{Path: rel, Type: TypeDelete})
			return nil
		}
		typ := TypeChar
		if st.Mode&unix.S_IFMT == unix.S_IFBLK {
			typ = TypeBlock
		}
		e := w.meta(rel, typ, st)
		e.Major, e.Minor = unix.Major(st.Rdev), unix.Minor(st.Rdev)
		w.entries = append(w.entries, e)
	case unix.S_IFIFO:
		w.entries = append(w.entries, w.meta(rel, TypeFifo, st))
	case unix.S_IFSOCK:
		w.log.Debug("commit: skipping socket", "path", path)
	default:
		return fmt.Errorf("%s: unknown file type %#o", path, st.Mode&unix.S_IFMT)
	}
	return nil
}

func (w *walker) meta(rel string, typ EntryType, st *unix.Stat_t) Entry {
	e := Entry{Path: rel, Type: typ, Mode: st.Mode & 0o7777, UID: st.Uid, GID: st.Gid}
	if w.opts.MapOwner != nil {
		e.UID, e.GID = w.opts.MapOwner(e.UID, e.GID)
	}
	if w.opts.KeepMtime {
		e.Mtime = max(st.Mtim.Nano(), 1)
	}
	return e
}

// storeFiles hashes every file entry (filling in its digest) and writes the
// content not yet in the store to temp files, with Workers goroutines. Each
// new object gets the metadata of the first entry that needs it, so that it
// doubles as that entry's inode.
func (s *Store) storeFiles(ctx context.Context, entries []Entry, srcs map[int]string, holdBytes int64, hashLater, copyNow bool) ([]pendingObject, error) {
	var (
		mu      sync.Mutex // guards claimed, pending, holdBytes
		claimed = map[Digest]bool{}
		pending []pendingObject
	)
	// hold takes n bytes of what may be held in memory, if that many are
	// left.
	hold := func(n int64) bool {
		mu.Lock()
		defer mu.Unlock()
		if n > holdBytes {
			return false
		}
		holdBytes -= n
		return true
	}
	claim := func(d Digest) bool {
		mu.Lock()
		defer mu.Unlock()
		if claimed[d] {
			return false
		}
		claimed[d] = true
		return true
	}
	var files []int
	for i := range entries {
		if entries[i].Type == TypeFile {
			files = append(files, i)
		}
	}
	err := parallel(ctx, s.workers, len(files), func(ctx context.Context, k int) error {
		i := files[k]
		var p pendingObject
		var err error
		if hashLater && copyNow {
			p, err = s.copyUnhashed(ctx, &entries[i], srcs[i])
		} else {
			p, err = s.storeFile(ctx, &entries[i], srcs[i], claim, hold, hashLater)
		}
		if err != nil {
			return err
		}
		p.entry = i
		if p.tmp != "" || p.held != nil {
			mu.Lock()
			pending = append(pending, p)
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		discard(pending)
		return nil, err
	}
	return pending, nil
}

// storeFile hashes one file and, when its object is missing and claim says
// this call is the first to want it, writes it to a temp file, or, for a
// small file that hold lets it keep, keeps its content in memory; with
// hashLater, such a file is kept unhashed (Staged.WriteOut hashes it).
func (s *Store) storeFile(ctx context.Context, e *Entry, src string, claim func(Digest) bool, hold func(int64) bool, hashLater bool) (pendingObject, error) {
	f, err := os.Open(src)
	if err != nil {
		return pendingObject{}, err
	}
	defer f.Close()
	var (
		small []byte
		bp    *[]byte
	)
	if e.Size <= smallFile {
		bp = copyBufPool.Get().(*[]byte)
		defer func() {
			if bp != nil { // not handed to a held object
				copyBufPool.Put(bp)
			}
		}()
		n, err := io.ReadFull(f, (*bp)[:e.Size])
		if err != nil {
			return pendingObject{}, fmt.Errorf("reading %s: %w (%w: expected %d bytes, file changed?)", src, err, ErrSizeMismatch, e.Size)
		}
		small = (*bp)[:n]
		if hashLater {
			if p, ok := holdContent(small, &bp, Digest{}, nil, hold); ok {
				p.unhashed = true
				return p, nil
			}
		}
		e.Digest = sha256.Sum256(small)
	} else {
		h := sha256.New()
		n, err := copyHashing(ctx, io.Discard, h, f)
		if err != nil {
			return pendingObject{}, fmt.Errorf("hashing %s: %w", src, err)
		}
		if n != e.Size {
			return pendingObject{}, fmt.Errorf("%s: %w: read %d bytes, expected %d (file changed?)", src, ErrSizeMismatch, n, e.Size)
		}
		copy(e.Digest[:], h.Sum(nil))
	}
	if s.HasObject(e.Digest) || !claim(e.Digest) {
		return pendingObject{}, nil
	}
	key := s.keyOf(e).withoutXattrs()
	if small != nil {
		if p, ok := holdContent(small, &bp, e.Digest, &key, hold); ok {
			return p, nil
		}
	}
	var p pendingObject
	if small != nil {
		// In memory and hashed above: written as it is, not hashed again.
		p, err = s.writeTempFrom(ctx, bytes.NewReader(small), e.Size, e.Digest, true, &key, false)
	} else if _, err = f.Seek(0, io.SeekStart); err == nil {
		p, err = s.writeTemp(ctx, f, e.Size, e.Digest, &key, false)
	}
	if err != nil {
		return pendingObject{}, fmt.Errorf("storing %s: %w", src, err)
	}
	return p, nil
}

// copyUnhashed copies file e's content at src to a temp file with e's
// metadata but its xattrs (its inode key's once hashed), in the kernel
// (sendfile), to be hashed later (Staged.hashHeld).
func (s *Store) copyUnhashed(ctx context.Context, e *Entry, src string) (p pendingObject, err error) {
	in, err := os.Open(src)
	if err != nil {
		return p, err
	}
	defer in.Close()
	if err := s.budget.Acquire(ctx, e.Size); err != nil {
		return p, err
	}
	defer s.budget.Release(e.Size)
	out, err := os.CreateTemp(s.path("tmp"), "obj-*")
	if err != nil {
		return p, fmt.Errorf("creating temp object: %w", err)
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			os.Remove(out.Name())
			err = fmt.Errorf("copying %s: %w", src, err)
		}
	}()
	var n int64
	for n < e.Size {
		m, err := unix.Sendfile(int(out.Fd()), int(in.Fd()), nil, int(min(e.Size-n, 1<<30)))
		if err != nil {
			return p, err
		}
		if m == 0 {
			break
		}
		n += int64(m)
	}
	if n != e.Size {
		return p, fmt.Errorf("%w: copied %d bytes, expected %d (file changed?)", ErrSizeMismatch, n, e.Size)
	}
	key := s.keyOf(e).withoutXattrs() // its digest is set once hashed
	if err := s.setFileMeta(out, &key); err != nil {
		return p, err
	}
	return pendingObject{tmp: out.Name(), unhashed: true}, nil
}

// heldCopy is the size below which held content is copied out of its
// read buffer; a larger file keeps the buffer (copyBufSize bytes held).
const heldCopy = 64 << 10

// holdContent makes a pending object that holds a small file's content
// (data, read into *bp) in memory, if hold lets it: a copy of a tiny
// file, or the read buffer itself, which *bp then no longer names.
func holdContent(data []byte, bp **[]byte, d Digest, key *inodeKey, hold func(int64) bool) (pendingObject, bool) {
	if len(data) < heldCopy {
		if !hold(int64(len(data))) {
			return pendingObject{}, false
		}
		return pendingObject{digest: d, key: key, held: append(make([]byte, 0, len(data)), data...)}, true
	}
	if !hold(copyBufSize) {
		return pendingObject{}, false
	}
	p := pendingObject{digest: d, key: key, held: data, heldBuf: *bp}
	*bp = nil
	return p, true
}

// dirOpaque reports whether an upper dir's directory is opaque. The value
// "x" only says the directory holds xattr whiteouts: not opaque.
func dirOpaque(path string) (bool, error) {
	for _, ns := range []string{"trusted", "user"} {
		v, ok, err := getXattr(path, ns+".overlay.opaque")
		if err != nil {
			return false, err
		}
		if ok && v == "y" {
			return true, nil
		}
	}
	if r, err := hasOverlayXattr(path, "redirect"); err != nil {
		return false, err
	} else if r {
		return false, fmt.Errorf("%w: %s has a redirect (mount the build overlay with redirect_dir=off)", ErrUnsupportedOverlay, path)
	}
	return false, nil
}

func xattrWhiteout(path string) (bool, error) {
	return hasOverlayXattr(path, "whiteout")
}

// hasOverlayXattr reports whether trusted.overlay.<name> or
// user.overlay.<name> is set on path.
func hasOverlayXattr(path, name string) (bool, error) {
	for _, ns := range []string{"trusted", "user"} {
		_, ok, err := getXattr(path, ns+".overlay."+name)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// getXattr returns an xattr's value (truncated to 256 bytes) and whether it
// is set. Absent, unsupported and (for trusted.* as non-root) invisible
// xattrs are reported as not set.
func getXattr(path, name string) (string, bool, error) {
	var buf [256]byte
	n, err := unix.Lgetxattr(path, name, buf[:])
	switch {
	case err == nil:
		return string(buf[:n]), true, nil
	case errors.Is(err, unix.ERANGE):
		return string(buf[:]), true, nil
	case errors.Is(err, unix.ENODATA), errors.Is(err, unix.ENOTSUP), errors.Is(err, unix.EPERM):
		return "", false, nil
	}
	return "", false, fmt.Errorf("getxattr %s %s: %w", path, name, err)
}
