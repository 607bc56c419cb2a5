package store

import (
	"bufio"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
)

// A tree stream is a directory tree as CommitDir reads it (an overlay upper
// dir's whiteouts and opaque directories included), written by one process
// (WriteTree) and committed by another (CommitTree). It lets a process that
// can read the tree, but must not write the store, hand it to one that
// writes the store: a rootless sandbox's writable layer holds files of its
// user's ids that only a process in the sandbox's user namespace may read.
//
// The stream is a gob of treeFrame values; each file's frame is followed by
// exactly its Size bytes of content; a frame with Done ends it.

// treeFrame is one entry of a tree stream, or its end.
type treeFrame struct {
	Entry Entry
	Done  bool
}

// ErrTreeStream means a tree stream ended early or held what WriteTree
// never writes.
var ErrTreeStream = errors.New("bad tree stream")

// WriteTree writes the tree at dir to w as a tree stream, owners as this
// process sees them, and times (CommitTree drops them unless asked to keep
// them). dir must not change while it is written.
func WriteTree(ctx context.Context, w io.Writer, dir string) error {
	wk := walker{log: slog.New(slog.DiscardHandler), root: dir, opts: CommitOptions{KeepMtime: true}}
	if err := wk.walk(ctx); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	enc := gob.NewEncoder(bw)
	for i := range wk.entries {
		e := &wk.entries[i]
		if err := enc.Encode(treeFrame{Entry: *e}); err != nil {
			return fmt.Errorf("writing tree entry %q: %w", e.Path, err)
		}
		if e.Type == TypeFile {
			if err := streamFile(ctx, bw, wk.srcs[i], e.Size); err != nil {
				return err
			}
		}
	}
	if err := enc.Encode(treeFrame{Done: true}); err != nil {
		return fmt.Errorf("ending tree stream: %w", err)
	}
	return bw.Flush()
}

// streamFile writes the size bytes of the file at src to w.
func streamFile(ctx context.Context, w io.Writer, src string, size int64) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := copyHashing(ctx, w, nopHash{}, io.LimitReader(f, size))
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	if n != size {
		return fmt.Errorf("%s: %w: read %d bytes, expected %d (file changed?)", src, ErrSizeMismatch, n, size)
	}
	return nil
}

// CommitTree commits the tree stream r as CommitDir commits a directory
// (opts as there; the owners are those the stream holds, mapped by
// opts.MapOwner). The same tree gives the same LayerID either way.
func (s *Store) CommitTree(ctx context.Context, r io.Reader, opts CommitOptions) (LayerID, error) {
	ref := opts.Ref
	if ref != "" {
		if err := validRef(ref); err != nil {
			return LayerID{}, err
		}
	}
	opts.Ref = ""
	st, err := s.StageTree(ctx, r, opts)
	if err != nil {
		return LayerID{}, err
	}
	if err := s.Publish(ctx, ref, st); err != nil {
		return st.ID, fmt.Errorf("committing a tree stream: %w", err)
	}
	return st.ID, nil
}

// StageTree is the first half of CommitTree, as StageDir is CommitDir's:
// the stream is read to its end and its new content written to temp
// files; opts.Ref is for Publish and must be empty here.
func (s *Store) StageTree(ctx context.Context, r io.Reader, opts CommitOptions) (*Staged, error) {
	if opts.Ref != "" {
		return nil, fmt.Errorf("staging a tree stream: a ref is set when the layer is published")
	}
	for _, p := range opts.Parents {
		if _, err := s.manifestBytes(p); err != nil {
			return nil, fmt.Errorf("committing a tree stream: parent: %w", err)
		}
	}
	lw, err := s.NewLayerWriter(ctx)
	if err != nil {
		return nil, err
	}
	defer lw.Close()
	entries, err := readTree(ctx, lw, r, opts)
	if err != nil {
		return nil, fmt.Errorf("committing a tree stream: %w", err)
	}
	st, err := s.staged(&Manifest{Version: ManifestVersion, Parents: opts.Parents, Entries: entries}, lw.pending)
	if err != nil {
		return nil, fmt.Errorf("committing a tree stream: %w", err)
	}
	// The staged layer takes over the writer's content and lock.
	st.unlock, lw.pending, lw.unlock = lw.unlock, nil, nil
	return st, nil
}

// readTree reads a tree stream's entries, adding each file's content to lw.
func readTree(ctx context.Context, lw *LayerWriter, r io.Reader, opts CommitOptions) ([]Entry, error) {
	br := bufio.NewReaderSize(r, 1<<20) // an io.ByteReader: gob reads no further than a frame
	dec := gob.NewDecoder(br)
	var entries []Entry
	for {
		var f treeFrame
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("%w: after %d entries: %w", ErrTreeStream, len(entries), err)
		}
		if f.Done {
			return entries, nil
		}
		e := f.Entry
		if opts.MapOwner != nil && e.Type != TypeDelete {
			e.UID, e.GID = opts.MapOwner(e.UID, e.GID)
		}
		if !opts.KeepMtime {
			e.Mtime = 0
		}
		if e.Type == TypeFile {
			if e.Size < 0 {
				return nil, fmt.Errorf("%w: %q has size %d", ErrTreeStream, e.Path, e.Size)
			}
			if err := lw.AddFile(ctx, &e, io.LimitReader(br, e.Size)); err != nil {
				return nil, err
			}
		}
		entries = append(entries, e)
	}
}
