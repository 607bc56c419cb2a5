package store

import (
	"context"
	"fmt"
	"io"
)

// LayerWriter commits layers whose files arrive as streams (an image
// layer's tar entries, say) rather than as a directory tree, so nothing is
// extracted to a temp tree first. It holds the store's shared lock from
// NewLayerWriter to Close, so GC cannot collect a layer it committed before
// a ref or a child layer names it; a run of Commits and SetRefs is
// therefore as safe as one CommitDir. Content added with AddFile stays
// invisible until a Commit publishes it; Close discards what no Commit
// published. A LayerWriter is not safe for concurrent use.
type LayerWriter struct {
	s       *Store
	unlock  func()
	pending []pendingObject
	claimed map[Digest]bool
}

// NewLayerWriter takes the store's shared lock and returns a writer; the
// caller must Close it.
func (s *Store) NewLayerWriter(ctx context.Context) (*LayerWriter, error) {
	unlock, err := s.lock(ctx, false)
	if err != nil {
		return nil, err
	}
	return &LayerWriter{s: s, unlock: unlock, claimed: map[Digest]bool{}}, nil
}

// AddFile reads a file entry's content from r, which must hold e.Size
// bytes, and sets e.Digest. New content is written to a temp file with the
// entry's metadata (so it doubles as the entry's inode) and published by
// the next Commit; content the store or this writer already holds is read
// and dropped.
func (w *LayerWriter) AddFile(ctx context.Context, e *Entry, r io.Reader) error {
	if e.Type != TypeFile || e.Size < 0 {
		return fmt.Errorf("%w: entry %q: AddFile wants a file with a size", ErrBadManifest, e.Path)
	}
	e.Digest = Digest{}
	// An object never carries extended attributes (ensureInode would link
	// it as an inode without them): an entry that has some gets its inode
	// as a copy when the layer is materialized.
	key := w.s.keyOf(e).withoutXattrs()
	p, err := w.s.writeTemp(ctx, r, e.Size, Digest{}, &key, false)
	if err != nil {
		return fmt.Errorf("storing %s: %w", e.Path, err)
	}
	e.Digest = p.digest
	if w.claimed[p.digest] || w.s.HasObject(p.digest) {
		discard([]pendingObject{p})
		return nil
	}
	// The key was made before the digest was known.
	p.key.digest = p.digest
	w.claimed[p.digest] = true
	w.pending = append(w.pending, p)
	return nil
}

// Commit publishes the content added so far, writes the manifest (its
// entries are sorted here; every file's object must be in the store or
// added by AddFile) and materializes the layer. The parents must be in the
// store.
func (w *LayerWriter) Commit(ctx context.Context, m *Manifest) (LayerID, error) {
	for _, p := range m.Parents {
		if _, err := w.s.manifestBytes(p); err != nil {
			return LayerID{}, fmt.Errorf("parent: %w", err)
		}
	}
	m.sortEntries()
	b, err := m.Encode()
	if err != nil {
		return LayerID{}, err
	}
	if err := w.s.publish(w.pending); err != nil {
		w.pending = nil
		return LayerID{}, err
	}
	w.pending = nil
	for i := range m.Entries {
		if e := &m.Entries[i]; e.Type == TypeFile && !w.s.HasObject(e.Digest) {
			return LayerID{}, fmt.Errorf("entry %q: object %s: %w", e.Path, e.Digest, ErrNotFound)
		}
	}
	id, err := w.s.putManifest(b)
	if err != nil {
		return id, err
	}
	if _, err := w.s.materialize(ctx, id, m); err != nil {
		return id, err
	}
	return id, nil
}

// SetRef points a ref at a layer, which must be in the store.
func (w *LayerWriter) SetRef(name string, id LayerID) error {
	if err := validRef(name); err != nil {
		return err
	}
	if !w.s.Has(id) {
		return fmt.Errorf("setting ref %s: layer %s: %w", name, id, ErrNotFound)
	}
	return w.s.setRef(name, id)
}

// Close discards unpublished content and releases the lock. It may be
// called more than once.
func (w *LayerWriter) Close() error {
	discard(w.pending)
	w.pending = nil
	if w.unlock != nil {
		w.unlock()
		w.unlock = nil
	}
	return nil
}
