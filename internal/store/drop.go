package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A layer made for a moment (a forked evaluation's set-up: its children
// start over it, then it is of no use) can be dropped as soon as its
// maker is done with it, instead of waiting for the next GC: Drop removes
// it under GC's rule (nothing reaches it: no ref, no live lease, through
// parents too) and the content it brought that no other layer uses.
//
// What it brought is known without reading the store's other manifests:
// the objects its stage wrote (Staged.Created: the store did not hold
// them when it was staged) can be named only by layers published after
// the stage began, since a manifest is renamed into place only after its
// objects are. So a Mark taken before the stage lists every layer that
// cannot name them; Drop reads the manifests of the others alone (those
// published since: a few, from evaluations running at the same time).

// The same content staged twice at once (two evaluations of one row, one
// patch) is one layer: the first Drop keeps it for the other's lease,
// and the other's Mark may hold it already, its Created lack what the
// first brought. So a Drop kept for a lease is remembered by the store
// (within the process), and the next Drop of the layer takes over what
// it knew: the layers both marks hold, the content either brought.

// heldDrops are the Drops kept for a lease, by layer.
type heldDrops struct {
	mu sync.Mutex
	m  map[LayerID]heldDrop
}

// heldDrop is what a Drop kept for a lease knew.
type heldDrop struct {
	since   Mark
	created []Digest
}

// A Mark is the set of layers a store held at a moment (Store.Mark).
type Mark struct {
	had map[LayerID]bool
}

// Mark lists the store's layers now; take it before staging a layer that
// Drop may remove.
func (s *Store) Mark() (Mark, error) {
	ids, err := s.manifestIDs()
	if err != nil {
		return Mark{}, fmt.Errorf("marking the store's layers: %w", err)
	}
	m := Mark{had: make(map[LayerID]bool, len(ids))}
	for _, id := range ids {
		m.had[id] = true
	}
	return m, nil
}

// and is the layers both m and o hold.
func (m Mark) and(o Mark) Mark {
	both := Mark{had: map[LayerID]bool{}}
	for id := range m.had {
		if o.had[id] {
			both.had[id] = true
		}
	}
	return both
}

// manifestIDs lists the layers whose manifests are in the store.
func (s *Store) manifestIDs() ([]LayerID, error) {
	ents, err := os.ReadDir(s.path("manifests"))
	if err != nil {
		return nil, err
	}
	var out []LayerID
	for _, e := range ents {
		h, ok := strings.CutSuffix(e.Name(), manifestSuffix)
		if d, err := parseHexDigest(h); ok && err == nil {
			out = append(out, LayerID(d))
		}
	}
	return out, nil
}

// Created lists the content of the stage that the store did not hold when
// it was staged: the objects its Publish brings (or that a stage at the
// same time brought first). A stage that hashes later
// (CommitOptions.HashLater) knows it once WriteOut returned; call it
// before Publish.
func (st *Staged) Created() []Digest {
	out := make([]Digest, 0, len(st.pending))
	for _, p := range st.pending {
		if !p.unhashed && !p.had {
			out = append(out, p.digest)
		}
	}
	return out
}

// PublishLeased is Publish, then a lease on the layers (Lease), with no
// GC or Drop between: a layer that the same content makes elsewhere at
// the same time (a dedup) is not removed before its maker holds it.
func (s *Store) PublishLeased(ctx context.Context, ref string, layers ...*Staged) (*Lease, error) {
	unlock, err := s.lock(ctx, false)
	if err != nil {
		for _, l := range layers {
			l.Discard()
		}
		return nil, err
	}
	defer unlock()
	if err := s.Publish(ctx, ref, layers...); err != nil {
		return nil, err
	}
	ids := make([]LayerID, len(layers))
	for i, l := range layers {
		ids[i] = l.ID
	}
	return s.Lease(ctx, ids...)
}

// DropReport says what Drop removed; Kept, when not empty, says why the
// layer stays (then nothing was removed).
type DropReport struct {
	Kept       string
	Objects    int   // objects removed
	Inodes     int   // inode pool entries removed
	Shifted    int   // shifted trees removed
	FreedBytes int64 // disk blocks freed, from st_blocks
}

// Drop removes layer id, which its caller published after since was
// taken and staged with created (Staged.Created), unless a ref or a live
// lease reaches it, and the objects and inodes of created that no layer
// published since uses. The caller releases its own lease first. It holds
// the store lock exclusively, as GC does: commits, leases and GC wait for
// it, and it for them. A layer another holds (the same content leased by
// someone else) is kept, with the reason; so is one already gone.
func (s *Store) Drop(ctx context.Context, id LayerID, since Mark, created []Digest) (DropReport, error) {
	var r DropReport
	unlock, err := s.lock(ctx, true)
	if err != nil {
		return r, err
	}
	defer unlock()

	s.heldDrops.mu.Lock()
	if h, ok := s.heldDrops.m[id]; ok {
		delete(s.heldDrops.m, id)
		since, created = since.and(h.since), append(slices.Clone(created), h.created...)
	}
	s.heldDrops.mu.Unlock()
	if since.had[id] {
		// Not made by the caller alone: left to GC.
		r.Kept = "in the store before it was staged"
		return r, nil
	}
	m, err := s.Manifest(id)
	if err != nil {
		r.Kept = "not in the store"
		return r, nil
	}
	live, _, err := s.liveLeases()
	if err != nil {
		return r, fmt.Errorf("dropping layer %s: %w", id.Short(), err)
	}
	if slices.Contains(live, id) {
		s.heldDrops.mu.Lock()
		if s.heldDrops.m == nil {
			s.heldDrops.m = map[LayerID]heldDrop{}
		}
		s.heldDrops.m[id] = heldDrop{since, created}
		s.heldDrops.mu.Unlock()
		r.Kept = "leased"
		return r, nil
	}
	refs, err := s.Refs()
	if err != nil {
		return r, fmt.Errorf("dropping layer %s: listing refs: %w", id.Short(), err)
	}
	for _, ref := range refs {
		// A ref reaching id names it or a layer above it: one published
		// since the mark.
		if since.had[ref.Layer] {
			continue
		}
		stack, err := s.Stack(ref.Layer)
		if err != nil {
			continue // a dangling ref reaches nothing
		}
		if slices.Contains(stack, id) {
			r.Kept = "ref " + ref.Name
			return r, nil
		}
	}

	// Content the layer may have brought, and what the layers published
	// since its mark use of it.
	brought := map[Digest]bool{}
	for _, d := range created {
		brought[d] = true
	}
	mine := map[Digest]bool{}
	for i := range m.Entries {
		if e := &m.Entries[i]; e.Type == TypeFile && brought[e.Digest] {
			mine[e.Digest] = true
		}
	}
	usedObj, usedInode := map[Digest]bool{}, map[string]bool{}
	if len(mine) > 0 {
		ids, err := s.manifestIDs()
		if err != nil {
			return r, fmt.Errorf("dropping layer %s: %w", id.Short(), err)
		}
		for _, other := range ids {
			if other == id || since.had[other] {
				continue
			}
			om, err := s.Manifest(other)
			if err != nil {
				return r, fmt.Errorf("dropping layer %s: %w", id.Short(), err)
			}
			for i := range om.Entries {
				if e := &om.Entries[i]; e.Type == TypeFile && mine[e.Digest] {
					usedObj[e.Digest] = true
					usedInode[s.keyOf(e).name()] = true
				}
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}

	// The shifted trees over it, its tree, its manifest: then no layer
	// names the content removed last.
	if r.Shifted, err = s.dropShifted(id); err != nil {
		return r, err
	}
	if err := s.removeTree(s.layerDir(id)); err != nil {
		return r, fmt.Errorf("dropping layer %s: %w", id.Short(), err)
	}
	if err := os.Remove(s.manifestPath(id)); err != nil {
		return r, fmt.Errorf("dropping layer %s: %w", id.Short(), err)
	}
	s.parentsMu.Lock()
	delete(s.parents, id)
	s.parentsMu.Unlock()
	free := func(p string) bool {
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil || os.Remove(p) != nil {
			return false
		}
		if st.Nlink <= 1 {
			r.FreedBytes += st.Blocks * 512
		}
		return true
	}
	for d := range mine {
		if usedObj[d] {
			continue
		}
		// Every inode of the content: made since the mark too.
		h := d.Hex()
		names, _ := filepath.Glob(filepath.Join(s.root, "inodes", h[:2], h+"-*"))
		for _, p := range names {
			if !usedInode[filepath.Base(p)] && free(p) {
				r.Inodes++
			}
		}
		// Raw, or compressed when the layer was cold (Compact); both
		// after a thaw a crash stopped.
		raw, cold := free(s.objectPath(d)), free(s.compressedPath(d))
		if raw || cold {
			r.Objects++
		}
	}
	if err := s.syncFS(); err != nil {
		return r, err
	}
	return r, nil
}

// dropShifted removes the shifted trees whose stack holds id.
func (s *Store) dropShifted(id LayerID) (int, error) {
	ents, err := os.ReadDir(s.path("shifted"))
	if err != nil {
		return 0, nil // none made
	}
	n := 0
	for _, e := range ents {
		dir := s.path("shifted", e.Name())
		b, err := os.ReadFile(filepath.Join(dir, shiftedLayersFile))
		if strings.HasPrefix(e.Name(), ".tmp-") || err != nil || !slices.ContainsFunc(strings.Fields(string(b)), func(l string) bool {
			d, err := parseHexDigest(l)
			return err == nil && LayerID(d) == id
		}) {
			continue
		}
		if err := removeAllWritable(dir); err != nil {
			return n, fmt.Errorf("dropping layer %s: %w", id.Short(), err)
		}
		n++
	}
	return n, nil
}
