package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// copyBufSize is the buffer size for streaming object content.
const copyBufSize = 1 << 20

var copyBufPool = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// HasObject reports whether the store holds the object, raw or
// compressed (a cold object, see Compact).
func (s *Store) HasObject(d Digest) bool {
	return s.HasRawObject(d) || s.hasCompressed(d)
}

// HasRawObject reports whether the store holds the object uncompressed.
func (s *Store) HasRawObject(d Digest) bool {
	_, err := os.Lstat(s.objectPath(d))
	return err == nil
}

// OpenObject opens an object's content for reading. A cold object is
// decompressed into an unlinked temp file, checked against its digest.
func (s *Store) OpenObject(d Digest) (*os.File, error) {
	f, err := os.Open(s.objectPath(d))
	if errors.Is(err, fs.ErrNotExist) {
		f, err = s.decompressedTemp(context.Background(), d)
		if errors.Is(err, fs.ErrNotExist) {
			// Thawed meanwhile?
			if f, err = os.Open(s.objectPath(d)); errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("object %s: %w", d, ErrNotFound)
			}
		}
	}
	return f, err
}

// PutObject stores the content read from r, which must have the given size
// and digest; it returns once the object is durable. It is a no-op when the
// object is present (r is then not read).
func (s *Store) PutObject(ctx context.Context, r io.Reader, size int64, d Digest) error {
	unlock, err := s.lock(ctx, false)
	if err != nil {
		return err
	}
	defer unlock()
	if s.HasObject(d) {
		return nil
	}
	p, err := s.writeTemp(ctx, r, size, d, nil, true)
	if err != nil {
		return err
	}
	return s.publish([]pendingObject{p})
}

// pendingObject is verified content in a temp file, not yet visible; or
// content held in memory (held), hashed already, that writeHeld writes
// to a temp file.
type pendingObject struct {
	tmp    string
	digest Digest
	key    *inodeKey // the inode the temp file's metadata matches, if any
	synced bool      // fsynced already
	held   []byte    // content not written yet (tmp is then "")
	// unhashed: held content not hashed yet (CommitOptions.HashLater);
	// digest and key are then unset, and entry is the index of its
	// file's entry in the stage's manifest, not sorted yet.
	unhashed bool
	entry    int
	writing  bool // its writeback to disk started (not durable)
	// had: once hashed, its content was in the store already, or
	// another file of the stage brings it; it is pending only as the
	// inode an early tree links (early.go), not as content it adds.
	had bool
	// heldBuf, when not nil, is the copy buffer held holds, back to
	// copyBufPool once written.
	heldBuf *[]byte
}

// release drops p's held content.
func (p *pendingObject) release() {
	if p.heldBuf != nil {
		copyBufPool.Put(p.heldBuf)
	}
	p.held, p.heldBuf = nil, nil
}

// writeHeld writes the held content of batch's objects to temp files, in
// parallel. On error what was held stays held (discard releases it).
func (s *Store) writeHeld(ctx context.Context, batch []pendingObject) error {
	var held []int
	for i := range batch {
		if batch[i].held != nil && batch[i].tmp == "" {
			held = append(held, i)
		}
	}
	return parallel(ctx, s.workers, len(held), func(ctx context.Context, k int) error {
		p := &batch[held[k]]
		w, err := s.writeTempFrom(ctx, bytes.NewReader(p.held), int64(len(p.held)), p.digest, true, p.key, false)
		if err != nil {
			return err
		}
		p.release()
		p.tmp = w.tmp
		return nil
	})
}

// writeTemp copies r into a temp file of the store, hashing what it writes,
// and checks the size and digest (when size >= 0 and want is not zero). The
// file gets key's metadata, or mode 0444 without a key. With sync, the file
// is fsynced. On error nothing is left behind.
func (s *Store) writeTemp(ctx context.Context, r io.Reader, size int64, want Digest, key *inodeKey, sync bool) (p pendingObject, err error) {
	return s.writeTempFrom(ctx, r, size, want, false, key, sync)
}

// writeTempFrom is writeTemp; with hashed, r's content is known to hash to
// want (the caller hashed it in memory, where it cannot change since), and
// it is not hashed again.
func (s *Store) writeTempFrom(ctx context.Context, r io.Reader, size int64, want Digest, hashed bool, key *inodeKey, sync bool) (p pendingObject, err error) {
	if err := s.budget.Acquire(ctx, size); err != nil {
		return p, err
	}
	defer s.budget.Release(size)

	f, err := os.CreateTemp(s.path("tmp"), "obj-*")
	if err != nil {
		return p, fmt.Errorf("creating temp object: %w", err)
	}
	p.tmp = f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(p.tmp)
			what := "object"
			if !want.IsZero() {
				what = "object " + want.String()
			}
			err = fmt.Errorf("writing %s: %w", what, err)
		}
	}()

	var h hash.Hash = nopHash{}
	if !hashed {
		h = sha256.New()
	}
	var w io.Writer = f
	if s.hooks.wrapWriter != nil {
		w = s.hooks.wrapWriter(w)
	}
	n, err := copyHashing(ctx, w, h, r)
	if err != nil {
		return p, err
	}
	if size >= 0 && n != size {
		return p, fmt.Errorf("%w: wrote %d bytes, want %d", ErrSizeMismatch, n, size)
	}
	if hashed {
		p.digest = want
	} else {
		copy(p.digest[:], h.Sum(nil))
	}
	if !want.IsZero() && p.digest != want {
		return p, fmt.Errorf("%w: content hashes to %s", ErrDigestMismatch, p.digest)
	}
	if err := s.setFileMeta(f, key); err != nil {
		return p, err
	}
	if sync {
		if err := f.Sync(); err != nil {
			return p, fmt.Errorf("fsync: %w", err)
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return p, err
	}
	if st.Size != n {
		return p, fmt.Errorf("%w: temp file has %d bytes after writing %d", ErrSizeMismatch, st.Size, n)
	}
	if err := f.Close(); err != nil {
		return p, err
	}
	p.key = key
	p.synced = sync
	return p, nil
}

// nopHash stands in for the hash of content hashed already.
type nopHash struct{ hash.Hash }

func (nopHash) Write(b []byte) (int, error) { return len(b), nil }

// copyHashing copies r to w and h, checking ctx between chunks.
func copyHashing(ctx context.Context, w io.Writer, h hash.Hash, r io.Reader) (int64, error) {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	buf := *bp
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		m, rerr := r.Read(buf)
		if m > 0 {
			h.Write(buf[:m])
			if _, err := w.Write(buf[:m]); err != nil {
				return n, err
			}
			n += int64(m)
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, fmt.Errorf("reading source: %w", rerr)
		}
	}
}

// setFileMeta gives an open file the metadata of an inode key; without a
// key, the read-only mode 0444 of a plain object.
func (s *Store) setFileMeta(f *os.File, key *inodeKey) error {
	fd := int(f.Fd())
	if key == nil {
		return unix.Fchmod(fd, 0o444)
	}
	if !s.rootless {
		if err := unix.Fchown(fd, int(key.uid), int(key.gid)); err != nil {
			return fmt.Errorf("fchown %d:%d: %w", key.uid, key.gid, err)
		}
	}
	// After chown, which clears setuid and setgid.
	if err := unix.Fchmod(fd, key.mode); err != nil {
		return fmt.Errorf("fchmod %#o: %w", key.mode, err)
	}
	// After chown and chmod, which clear a file capability.
	if key.xattrs != "" {
		xs, err := decodeXattrs(key.xattrs)
		if err != nil {
			return err
		}
		if err := s.setXattrs(f.Name(), xs); err != nil {
			return err
		}
	}
	if key.mtime != 0 {
		ts := []unix.Timespec{unix.NsecToTimespec(key.mtime), unix.NsecToTimespec(key.mtime)}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, f.Name(), ts, 0); err != nil {
			return fmt.Errorf("setting mtime: %w", err)
		}
	}
	return nil
}

// publish makes pending objects visible: objects/sha256/xx/<hex> and, when
// the temp file has an inode's metadata, inodes/xx/<name> too, and durable.
// A name that already exists is kept (it has the same content, verified
// when it was written).
func (s *Store) publish(batch []pendingObject) error {
	b := s.newBarrier()
	if err := s.publishInto(batch, s.newBarrier(), b); err != nil {
		return err
	}
	return b.flush()
}

// publishInto publishes pending objects, their content made durable
// first (by the fsync in writeTemp, or else at the content barrier, with
// what else the caller added to it), and adds the directories that got
// new names to names: the caller flushes it before anything that names
// the objects is published. On error the batch is discarded.
func (s *Store) publishInto(batch []pendingObject, content, names *barrier) error {
	for _, p := range batch {
		if !p.synced {
			content.add(p.tmp)
		}
	}
	if err := content.flush(); err != nil {
		discard(batch)
		return err
	}
	var firstErr error
	for _, p := range batch {
		if firstErr == nil {
			firstErr = s.publishOne(p)
		}
		os.Remove(p.tmp)
	}
	if firstErr != nil {
		return firstErr
	}
	for _, p := range batch {
		names.add(filepath.Dir(s.objectPath(p.digest)))
		if p.key != nil {
			names.add(filepath.Dir(s.inodePath(*p.key)))
		}
	}
	return nil
}

func (s *Store) publishOne(p pendingObject) error {
	if p.key != nil {
		if err := linkIfAbsent(p.tmp, s.inodePath(*p.key)); err != nil {
			return fmt.Errorf("publishing inode %s: %w", p.key.name(), err)
		}
	}
	if err := linkIfAbsent(p.tmp, s.objectPath(p.digest)); err != nil {
		return fmt.Errorf("publishing object %s: %w", p.digest, err)
	}
	return nil
}

func linkIfAbsent(oldname, newname string) error {
	err := os.Link(oldname, newname)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return nil
	}
	return err
}

// discard removes unpublished temp files and drops held content.
func discard(batch []pendingObject) {
	for i := range batch {
		if batch[i].tmp != "" {
			os.Remove(batch[i].tmp)
		}
		batch[i].release()
	}
}
