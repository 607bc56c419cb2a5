package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A Staged layer is a commit in its first half: its source was read and
// hashed, the content the store lacks is in temp files of the store (or
// held in memory, CommitOptions.HoldBytes) and its manifest is made, but
// nothing of it is visible yet. Publish makes
// one or more staged layers visible, passing the barriers once for all of
// them; Discard drops one. Between the two the source is no longer read,
// so a caller that froze its writers can let them go on. A Staged holds
// the store's shared lock (GC waits for it) until then.
type Staged struct {
	// ID is the layer's id, known before it is published: once staged,
	// or for a stage that hashes later (CommitOptions.HashLater) once
	// WriteOut returned (the zero ID until then).
	ID LayerID

	s        *Store
	m        *Manifest
	b        []byte // m's encoding
	pending  []pendingObject
	unlockMu sync.Mutex // guards unlock
	unlock   func()
	// unhashed: some of pending holds content not hashed yet; m is
	// then not sorted or encoded, and ID not set (see hashHeld).
	unhashed bool
	// noWriteback: CommitOptions.NoWriteback.
	noWriteback bool
}

// Manifest is the staged layer's manifest (do not modify it); for a stage
// that hashes later, complete once WriteOut returned.
func (st *Staged) Manifest() *Manifest { return st.m }

// Discard removes what the layer staged and releases the store's lock; it
// does nothing once the layer is published or discarded.
func (st *Staged) Discard() {
	discard(st.pending)
	st.pending = nil
	st.release()
}

func (st *Staged) release() {
	st.unlockMu.Lock()
	defer st.unlockMu.Unlock()
	if st.unlock != nil {
		st.unlock()
		st.unlock = nil
	}
}

// WriteOut writes the content the stage held in memory
// (CommitOptions.HoldBytes) to temp files and starts writing the layer's
// new content out to disk, without waiting for the disk: Publish's first
// barrier, which still fsyncs it, then finds less to wait for. A caller
// with something else to wait for before it publishes (a snapshot, its
// sessions' state) spends that wait on the work, and adds no barrier (a
// separate fsync of the content would cost a journal commit of its own).
// It makes nothing durable and nothing visible. On error the layer is
// left as it was, to be discarded. Do not call it concurrently with
// Publish or Discard.
//
// A stage that hashes later (CommitOptions.HashLater) is hashed here
// first, file by file as each is written out (see hashHeld); its ID and
// Manifest are known once WriteOut returned.
func (st *Staged) WriteOut(ctx context.Context) error {
	if err := st.hashHeld(ctx, true); err != nil {
		return fmt.Errorf("staging layer: %w", err)
	}
	if err := st.s.writeHeld(ctx, st.pending); err != nil {
		return fmt.Errorf("staging layer %s: %w", st.ID.Short(), err)
	}
	for i := range st.pending {
		if p := &st.pending[i]; !p.synced && !p.writing && !st.noWriteback {
			startWriteback(p.tmp)
			p.writing = true
		}
	}
	return nil
}

// Hash, for a stage that hashes later (CommitOptions.HashLater), hashes
// the content it holds, in parallel, without writing it out: its ID and
// Manifest are known once Hash returned, and what it holds stays in
// memory until Publish (or WriteOut) writes it to temp files; content the
// store has, or that another file of the stage brings, is dropped.
// Nothing is written or visible. For a caller that answers once the
// layer is named and publishes it after (a snapshot: docs/engine.md). On
// error the layer is left as it was, to be discarded. Do not call it
// concurrently with WriteOut, Publish or Discard.
func (st *Staged) Hash(ctx context.Context) error {
	if err := st.hashHeld(ctx, false); err != nil {
		return fmt.Errorf("staging layer: %w", err)
	}
	return nil
}

// startWriteback starts writing a temp file's content to disk without
// waiting for it; a file that cannot be opened is left to the barrier.
func startWriteback(path string) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return
	}
	unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WRITE)
	unix.Close(fd)
}

// hashHeld, for a stage that hashes later, hashes the content it holds,
// in parallel, each file's, with write, as one step with its writing
// out: its digest goes into its manifest entry; content the store has, or
// that another file of the stage brings, is dropped; with write the rest
// is written to a temp file with the entry's metadata and its writeback
// started at once, so that the disk has it on its way while the other
// files are hashed; without, it stays held, hashed, for writeHeld. Then
// the manifest is sorted and encoded, and ID set. Nothing is visible. On
// error the stage is left to be discarded.
func (st *Staged) hashHeld(ctx context.Context, write bool) error {
	if !st.unhashed {
		return nil
	}
	s := st.s
	var (
		mu      sync.Mutex // guards claimed
		claimed = map[Digest]bool{}
		todo    []int
	)
	for i, p := range st.pending {
		if p.unhashed {
			todo = append(todo, i)
		} else {
			claimed[p.digest] = true
		}
	}
	workers := s.workers
	if len(todo) > 0 && st.pending[todo[0]].tmp != "" {
		// After an early tree was built of it: a CPU is left to what
		// mounts the tree and runs on it, which waits for no hash.
		workers = max(1, workers-1)
	}
	err := parallel(ctx, workers, len(todo), func(ctx context.Context, k int) error {
		p := &st.pending[todo[k]]
		e := &st.m.Entries[p.entry]
		if p.held != nil {
			e.Digest = sha256.Sum256(p.held)
		} else if err := hashFile(p.tmp, &e.Digest); err != nil { // copied (CopyNow)
			return fmt.Errorf("%s: %w", e.Path, err)
		}
		mu.Lock()
		dup := claimed[e.Digest]
		claimed[e.Digest] = true
		mu.Unlock()
		if p.tmp != "" { // copied or written for an early tree, which links it (CopyNow, writeUnhashed)
			key := s.keyOf(e).withoutXattrs()
			p.release()
			p.digest, p.key, p.unhashed, p.had = e.Digest, &key, false, dup || s.HasObject(e.Digest)
			return nil
		}
		if dup || s.HasObject(e.Digest) {
			p.release()
			p.unhashed = false
			return nil
		}
		key := s.keyOf(e).withoutXattrs()
		if !write {
			p.digest, p.key, p.unhashed = e.Digest, &key, false
			return nil
		}
		w, err := s.writeTempFrom(ctx, bytes.NewReader(p.held), e.Size, e.Digest, true, &key, false)
		if err != nil {
			return fmt.Errorf("%s: %w", e.Path, err)
		}
		p.release()
		p.tmp, p.digest, p.key, p.unhashed = w.tmp, e.Digest, &key, false
		if !st.noWriteback {
			startWriteback(p.tmp)
			p.writing = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Dropped content left nothing pending.
	st.pending = slices.DeleteFunc(st.pending, func(p pendingObject) bool { return p.tmp == "" && p.held == nil })
	st.m.sortEntries()
	if st.b, err = st.m.Encode(); err != nil {
		return err
	}
	st.ID, st.unhashed = LayerID(DigestOf(st.b)), false
	return nil
}

// hashFile sets d to the digest of the file at path.
func hashFile(path string, d *Digest) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	h.Sum(d[:0])
	return nil
}

// StageDir is the first half of CommitDir (which see): dir is read and
// hashed, its new content written to temp files; opts.Ref is for Publish
// and must be empty here.
func (s *Store) StageDir(ctx context.Context, dir string, opts CommitOptions) (*Staged, error) {
	if opts.Ref != "" {
		return nil, fmt.Errorf("staging %s: a ref is set when the layer is published", dir)
	}
	unlock, err := s.lock(ctx, false)
	if err != nil {
		return nil, err
	}
	st, err := s.stageDir(ctx, dir, opts)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("committing %s: %w", dir, err)
	}
	st.unlock = unlock
	return st, nil
}

func (s *Store) stageDir(ctx context.Context, dir string, opts CommitOptions) (*Staged, error) {
	for _, p := range opts.Parents {
		if _, err := s.manifestBytes(p); err != nil {
			return nil, fmt.Errorf("parent: %w", err)
		}
	}
	w := walker{log: s.log, opts: opts, root: dir}
	if err := w.walk(ctx); err != nil {
		return nil, err
	}
	pending, err := s.storeFiles(ctx, w.entries, w.srcs, opts.HoldBytes, opts.HashLater, opts.CopyNow)
	if err != nil {
		return nil, err
	}
	m := &Manifest{Version: ManifestVersion, Parents: opts.Parents, Entries: w.entries}
	if slices.ContainsFunc(pending, func(p pendingObject) bool { return p.unhashed }) {
		// Sorted, encoded and named once hashed (hashHeld).
		return &Staged{s: s, m: m, pending: pending, unhashed: true, noWriteback: opts.NoWriteback}, nil
	}
	st, err := s.staged(m, pending)
	if err != nil {
		discard(pending)
		return nil, err
	}
	st.noWriteback = opts.NoWriteback
	return st, nil
}

// staged sorts and encodes m, whose new content is pending.
func (s *Store) staged(m *Manifest, pending []pendingObject) (*Staged, error) {
	m.sortEntries()
	b, err := m.Encode()
	if err != nil {
		return nil, err
	}
	return &Staged{ID: LayerID(DigestOf(b)), s: s, m: m, b: b, pending: pending}, nil
}

// File is a regular file of a layer StageFiles makes: its name in the
// layer's root, its permission bits and its content.
type File struct {
	Name string
	Mode uint32
	Data []byte
}

// StageFiles stages a layer of a few small files held in memory, owned by
// root in a root directory of mode rootMode: the layer CommitDir makes of
// a directory holding just them (with MapOwner giving root), such as the
// record a caller keeps above a layer. Its parents must be in the store
// or published before it by the same Publish. Their content is held in
// memory until Publish (or WriteOut) writes it: staging touches no disk.
func (s *Store) StageFiles(ctx context.Context, parents []LayerID, rootMode uint32, files ...File) (*Staged, error) {
	unlock, err := s.lock(ctx, false)
	if err != nil {
		return nil, err
	}
	entries := []Entry{{Path: ".", Type: TypeDir, Mode: rootMode & 0o7777}}
	var pending []pendingObject
	for _, f := range files {
		if f.Name == "" || f.Name == "." || f.Name == ".." || strings.ContainsAny(f.Name, "/\x00") {
			discard(pending)
			unlock()
			return nil, fmt.Errorf("%w: staging file %q: want a name in the layer's root", ErrBadManifest, f.Name)
		}
		e := Entry{Path: f.Name, Type: TypeFile, Mode: f.Mode & 0o7777, Size: int64(len(f.Data)), Digest: sha256.Sum256(f.Data)}
		entries = append(entries, e)
		if s.HasObject(e.Digest) || slices.ContainsFunc(pending, func(p pendingObject) bool { return p.digest == e.Digest }) {
			continue
		}
		// Held, hashed: Publish (or WriteOut) writes it to a temp file.
		key := s.keyOf(&e).withoutXattrs()
		pending = append(pending, pendingObject{digest: e.Digest, key: &key, held: append(make([]byte, 0, len(f.Data)), f.Data...)})
	}
	st, err := s.staged(&Manifest{Version: ManifestVersion, Parents: parents, Entries: entries}, pending)
	if err != nil {
		discard(pending)
		unlock()
		return nil, err
	}
	st.unlock = unlock
	return st, nil
}

// Publish makes staged layers visible, in order, and points ref (when not
// empty) at the last one, passing three barriers whatever their number and
// size: the content of their new objects, manifests and the ref; then the
// objects' and manifests' names and the layers' trees; then, with a ref,
// its rename. A crash leaves either no ref or one whose layers' objects
// and manifests are durable (a tree, a cache of them, is then present and
// complete, or absent and made again). Each layer's parents must be in the
// store or earlier in layers. The layers are released (published or, on
// error, discarded) whatever happens.
func (s *Store) Publish(ctx context.Context, ref string, layers ...*Staged) error {
	return s.publishLayers(ctx, ref, nil, layers...)
}

// publishLayers is Publish; with early, the layers' trees are built before the
// barriers and handed to it (PublishLeasedEarly).
func (s *Store) publishLayers(ctx context.Context, ref string, early *Early, layers ...*Staged) error {
	defer func() {
		for _, l := range layers {
			l.Discard()
		}
	}()
	trees := make([]string, len(layers))
	defer func() {
		for _, t := range trees {
			if t != "" {
				s.removeTree(t)
			}
		}
	}()
	placed := false // early.Place called
	names := s.newBarrier()
	if early != nil {
		// The trees first, from the content as read: what mounts them
		// needs the files, not the layers' names (early.go).
		if err := s.earlyTrees(ctx, layers, trees, names, early.Trees); err != nil {
			return err
		}
		// The trees are handed out: a failure from here on removes them
		// (the defer above, which runs after this one) once Place let go
		// of what mounts them.
		defer func() {
			if !placed && early.Place != nil {
				early.Place()
			}
		}()
	}
	for _, l := range layers {
		if err := l.hashHeld(ctx, true); err != nil {
			return fmt.Errorf("publishing: %w", err)
		}
	}
	if early != nil && early.Hashed != nil {
		early.Hashed()
	}
	if err := s.checkPublish(ref, layers); err != nil {
		return err
	}
	// Written, not yet renamed into place: removed on the way out.
	manifests, refTmp := make([]string, len(layers)), ""
	defer func() {
		for _, t := range append(manifests, refTmp) {
			if t != "" {
				os.Remove(t)
			}
		}
	}()
	content := s.newBarrier()
	for i, l := range layers {
		if _, err := os.Lstat(s.manifestPath(l.ID)); err == nil {
			continue
		}
		t, err := s.writeTempFile(manifestCodec.enc.EncodeAll(l.b, nil), 0o444)
		if err != nil {
			return fmt.Errorf("writing manifest of layer %s: %w", l.ID, err)
		}
		manifests[i] = t
		content.add(t)
	}
	if ref != "" {
		t, err := s.writeTempFile([]byte(layers[len(layers)-1].ID.String()+"\n"), 0o644)
		if err != nil {
			return fmt.Errorf("setting ref %s: %w", ref, err)
		}
		refTmp = t
		content.add(t)
	}
	var pending []pendingObject
	for _, l := range layers {
		pending = append(pending, l.pending...)
		l.pending = nil // publishInto removes them, or discards them on error
	}
	if err := s.writeHeld(ctx, pending); err != nil {
		discard(pending)
		return fmt.Errorf("publishing: %w", err)
	}
	if err := s.publishInto(pending, content, names); err != nil {
		return err
	}
	for i, l := range layers {
		if manifests[i] != "" {
			if err := os.Rename(manifests[i], s.manifestPath(l.ID)); err != nil {
				return fmt.Errorf("writing manifest of layer %s: %w", l.ID, err)
			}
			manifests[i] = ""
			names.add(filepath.Dir(s.manifestPath(l.ID)))
		}
		if early != nil {
			continue // built already
		}
		t, err := s.prepareTree(ctx, l.ID, l.m, names)
		if err != nil {
			return err
		}
		trees[i] = t
	}
	if err := names.flush(); err != nil {
		return err
	}
	if early != nil && early.Place != nil {
		placed = true
		early.Place()
	}
	for i, l := range layers {
		place := s.placeTree
		if early != nil {
			place = s.placeEarlyTree
		}
		if trees[i] != "" || early == nil {
			if err := place(l.ID, trees[i]); err != nil {
				return err
			}
		}
		trees[i] = ""
	}
	if ref == "" {
		return nil
	}
	if err := os.Rename(refTmp, s.refPath(ref)); err != nil {
		return fmt.Errorf("setting ref %s: %w", ref, err)
	}
	refTmp = ""
	last := s.newBarrier()
	last.add(filepath.Dir(s.refPath(ref)))
	if err := last.flush(); err != nil {
		return fmt.Errorf("setting ref %s: %w", ref, err)
	}
	return nil
}

// checkPublish checks a Publish's ref and that each layer's parents are in
// the store or staged before it.
func (s *Store) checkPublish(ref string, layers []*Staged) error {
	if len(layers) == 0 {
		return fmt.Errorf("publishing: no layer")
	}
	if ref != "" {
		if err := validRef(ref); err != nil {
			return err
		}
	}
	for i, l := range layers {
		for _, p := range l.m.Parents {
			if slices.ContainsFunc(layers[:i], func(o *Staged) bool { return o.ID == p }) {
				continue
			}
			if _, err := s.manifestBytes(p); err != nil {
				return fmt.Errorf("publishing layer %s: parent: %w", l.ID.Short(), err)
			}
		}
	}
	return nil
}
