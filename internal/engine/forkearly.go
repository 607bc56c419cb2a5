package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/store"
)

// A fork's children need the snapshot's files, not the store's fsyncs.
// The snapshot of a live raw parent in root mode is published with
// store.PublishLeasedEarly: its layer's tree is built from the staged
// content before the barriers, and the children (started beside it, or
// spares reset onto it) mount it from there; the store renames it into
// its place once they did (earlyTree), which leaves their mounts where
// they were. The fork returns
// once its children answer; the commit goes on beside them, and then
// each child leases the layer (settleFork). Until then the layer is
// settling: leasing it (layerPaths) or staging a layer above it (a
// child's own snapshot) waits. A crash meanwhile leaves the store as a
// crash during any commit does (the tree is in a temp dir of the store,
// gc's), and the children die with the host; a commit that fails closes
// the children, and so does a lease of a child's layers that fails (it
// has none before).

// settling is the layers being published whose trees are in use already.
type settling struct {
	mu sync.Mutex // guards m
	m  map[store.LayerID]*settle
}

// settle is one layer's publication(s) in flight: done is closed when
// the last ends.
type settle struct {
	n    int
	done chan struct{}
}

// begin marks id as settling until the returned function is called.
func (l *settling) begin(id store.LayerID) (end func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[store.LayerID]*settle{}
	}
	st := l.m[id]
	if st == nil {
		st = &settle{done: make(chan struct{})}
		l.m[id] = st
	}
	st.n++
	return sync.OnceFunc(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if st.n--; st.n == 0 {
			delete(l.m, id)
			close(st.done)
		}
	})
}

// wait returns once none of ids is settling, or ctx is done.
func (l *settling) wait(ctx context.Context, ids ...store.LayerID) error {
	for _, id := range ids {
		l.mu.Lock()
		st := l.m[id]
		l.mu.Unlock()
		if st == nil {
			continue
		}
		select {
		case <-st.done:
		case <-ctx.Done():
			return fmt.Errorf("waiting for layer %s to be published: %w", id.Short(), ctx.Err())
		}
	}
	return nil
}

// earlyTree is a snapshot's layer's tree before it is published (path)
// and the mounts of it in flight (users): the store renames the tree
// into its place once they are done (store.Early.Place), so that a
// mount never looks up a path gone.
type earlyTree struct {
	snap  snapshot
	path  string
	users *mountsInFlight
}

// layers are the paths of et's layers, bottom first, given those of its
// base: where they are (Config.Layers), and where they are mounted from
// now (sandbox.Deferred.Mount).
func (et earlyTree) layers(st *store.Store, base []string) (layers, mount []string) {
	layers = append(append([]string{}, base...), st.TreePath(et.snap.layer))
	mount = append(append([]string{}, base...), et.path)
	return layers, mount
}

// mountsInFlight counts the mounts of an early tree in flight.
type mountsInFlight struct {
	mu     sync.Mutex // guards the fields
	n      int
	closed bool
	idle   chan struct{} // closed when n drops to 0 once closed
}

// take counts a mount in flight; false once closed (then mount the
// tree in its place).
func (m *mountsInFlight) take() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.n++
	return true
}

// done ends a mount take counted.
func (m *mountsInFlight) done() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n--; m.n == 0 && m.idle != nil {
		close(m.idle)
		m.idle = nil
	}
}

// close takes no more mounts and waits for those in flight, up to
// maxMountWait (past it, a mount may find the tree gone, and its
// sandbox fails).
func (m *mountsInFlight) close() {
	m.mu.Lock()
	m.closed = true
	if m.n == 0 {
		m.mu.Unlock()
		return
	}
	idle := make(chan struct{})
	m.idle = idle
	m.mu.Unlock()
	select {
	case <-idle:
	case <-time.After(maxMountWait):
	}
}

// testHookPlace, in tests, runs when a fork's snapshot is durable, before
// its early tree is put in its place.
var testHookPlace = func() {}

// testHookHashed, in tests, runs when a fork's snapshot's layer is
// hashed, before anything is told.
var testHookHashed = func() {}

// maxMountWait bounds how long a fork's commit waits for its children's
// mounts of the early tree before it puts the tree in its place.
const maxMountWait = 30 * time.Second

// heldMount is a child's hold of an early tree until its mount is made
// (set by what mounts, ended by its caller once the mount is done).
type heldMount struct {
	mu   sync.Mutex // guards the fields
	done func()
	over bool
}

// set records done, to be called at end (at once if end came first).
func (h *heldMount) set(done func()) {
	h.mu.Lock()
	if h.over {
		h.mu.Unlock()
		done()
		return
	}
	h.done = done
	h.mu.Unlock()
}

// end calls what set recorded.
func (h *heldMount) end() {
	h.mu.Lock()
	h.over = true
	d := h.done
	h.done = nil
	h.mu.Unlock()
	if d != nil {
		d()
	}
}

// hashHold holds a fork's snapshot's hash back while spares are reset
// onto its early tree (childFromSpare): on 2 CPUs, a reset beside the
// hash (one CPU) waited for a CPU at each of its round trips to the
// spare's supervisor and its mount thread, and the child answered later
// (docs/bench.md, "Fork of a parent that wrote 8 MiB: the reset begun
// during the copy, the hash after it"). Nothing that a held reset needs
// waits for the hash; a hold not let go in maxHashHold is waited for no
// more.
type hashHold struct {
	mu   sync.Mutex // guards the fields
	n    int
	idle chan struct{} // closed when n drops to 0, if not nil
}

// maxHashHold bounds how long a fork's hash waits for its resets.
const maxHashHold = 100 * time.Millisecond

// take holds the hash until the returned function is called (once or
// more).
func (h *hashHold) take() (release func()) {
	h.mu.Lock()
	h.n++
	h.mu.Unlock()
	return sync.OnceFunc(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.n--; h.n == 0 && h.idle != nil {
			close(h.idle)
			h.idle = nil
		}
	})
}

// wait returns once no hold is taken, or after maxHashHold.
func (h *hashHold) wait() {
	h.mu.Lock()
	if h.n == 0 {
		h.mu.Unlock()
		return
	}
	if h.idle == nil {
		h.idle = make(chan struct{})
	}
	idle := h.idle
	h.mu.Unlock()
	t := time.NewTimer(maxHashHold)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	}
}
