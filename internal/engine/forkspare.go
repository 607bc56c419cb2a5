package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/store"
)

// Spares of a live sandbox's children (PoolFork). A child of a live raw
// sandbox has the parent's config over the parent's snapshot; a sandbox
// started ahead with the same config over the parent's layers at
// creation is that child once its root is put on the snapshot's layers
// in place, as a rollback does (sandbox.Sandbox.Reset): its processes
// killed (it has only its supervisor), a new overlay over the layers
// with an empty writable layer, /dev/shm emptied. So a fork
// that finds spares of its children's shape waits only for the
// snapshot, the reset and the sessions' shells, not for a sandbox's
// start. Rootless, the reset's mounts are made by a process in the
// sandbox's user namespace (nsenter and msb's reset-root stage), as long
// to start as a sandbox (docs/bench.md, "Rollback in place"): a spare
// starts it when it is made (sandbox.Sandbox.PrepareReset), and it waits
// there for the reset.

// forkShape is the key of the spares of src's children, src a live
// sandbox that can be reset in place, and false when they are not served
// from spares: a task sandbox's (a child is a task sandbox with its own
// registry proxy), one with a network policy (not in the key), or
// spares off.
func (e *Engine) forkShape(src forkSource) (poolKey, bool) {
	if e.cfg.Spares <= 0 || src.task != nil || src.conf.NetPolicy != nil {
		return poolKey{}, false
	}
	conf := forkConfig(src.conf, src.conf.Layers, src.conf.HostBase)
	conf.Hostname, conf.Stdio, conf.Session = "", nil, nil
	shape, err := json.Marshal(conf)
	if err != nil {
		return poolKey{}, false
	}
	return poolKey{kind: PoolFork, shape: string(shape), limits: src.limits}, true
}

// startForkSpare starts a spare of k, a PoolFork key: a raw sandbox of
// its config, over its layers (leased by it), with one session, hidden
// (spareSession), in the root when it has the host's base, and,
// rootless, its reset's stage started (PrepareReset; without it the
// reset starts one).
func (e *Engine) startForkSpare(ctx context.Context, k poolKey) (*Sandbox, error) {
	var conf sandbox.Config
	if err := json.Unmarshal([]byte(k.shape), &conf); err != nil {
		return nil, fmt.Errorf("fork spare's config: %w", err)
	}
	ids, err := layersOf(e.cache.st(), conf.Layers)
	if err != nil {
		return nil, err
	}
	paths, lease, err := e.layerPaths(ctx, ids, nil)
	if err != nil {
		return nil, err
	}
	conf.Layers = paths
	if conf.HostBase { // only a host base's shell can be kept (sandbox.Sandbox.ResetKeeping)
		conf.Session = &sandbox.SessionStart{Name: spareSession, SessionOptions: sandbox.SessionOptions{Dir: "/"}}
	}
	release, err := e.reserve(ctx, k.limits, -1, agentClass)
	if err != nil {
		lease.Release()
		return nil, err
	}
	s := &Sandbox{e: e, release: release, limits: k.limits, sessions: map[string]bool{}}
	if err := s.create(ctx, conf, nil, lease); err != nil {
		release()
		lease.Release()
		return nil, err
	}
	if err := s.sbox().PrepareReset(); err != nil {
		e.log.Debug("a fork's spare without its reset's stage started ahead", "err", err)
	}
	return s, nil
}

// childFromSpare is a child of src over fs from a spare of k, its root
// reset onto the snapshot's layers and its sessions reopened, not
// registered; nil when there is no spare or its reset failed (then the
// spare is closed and the caller starts the child). The reset's first
// half (sandbox.Sandbox.BeginReset: the spare's processes ended) is done
// while the snapshot is taken; while it is finished onto an early tree,
// the tree's hash waits (forkSnapshot.holdHash).
func (e *Engine) childFromSpare(ctx context.Context, k poolKey, src forkSource, fs forkSnapshot) (*Sandbox, error) {
	c := e.takeSpare(k)
	if c == nil {
		return nil, nil
	}
	c.info.ID = c.sbox().ID
	held := fs.holdHash()
	defer held()
	r, err := c.sbox().BeginReset(ctx, spareSession)
	if err != nil {
		c.discard()
		e.log.Debug("a fork's spare not reset: starting the child", "from", src.what, "err", err)
		return nil, nil
	}
	if before, mount, mounted := fs.tree(); mount != "" {
		return e.resetOntoTree(ctx, c, r, src, fs, before, mount, mounted)
	}
	held() // the snapshot is hashed before early returns
	snap, mount, mounted, err := fs.early()
	defer mounted()
	abort := func() {
		r.Abort()
		c.discard()
	}
	if err != nil {
		abort()
		return nil, err
	}
	if snap.rec.HostBase != src.conf.HostBase { // a named snapshot of another base
		abort()
		return nil, nil
	}
	d, lease, err := e.forkRoot(ctx, snap, mount, src.conf)
	if err != nil {
		abort()
		return nil, err
	}
	kept, err := r.Finish(ctx, d)
	if err != nil {
		lease.Release()
		c.discard()
		e.log.Debug("a fork's spare not reset: starting the child", "from", src.what, "err", err)
		return nil, nil
	}
	created := c.sbox().Config()
	if err := c.afterSpareReset(ctx, snap, lease, &created, kept); err != nil {
		return nil, err
	}
	return c, nil
}

// afterSpareReset makes c, a spare reset onto snap's layers (which lease
// keeps, if not nil), a child of snap created as created says: its
// sessions reopened, the first with the spare's shell when kept; on an
// error c is discarded.
func (c *Sandbox) afterSpareReset(ctx context.Context, snap snapshot, lease *store.Lease, created *sandbox.Config, kept bool) error {
	if err := c.afterReset(lease, created); err != nil {
		c.discard()
		return err
	}
	from := ""
	if kept {
		from = spareSession
	}
	if err := c.reopenSessionsFrom(ctx, snap.sessions(), from); err != nil {
		c.discard()
		return err
	}
	return nil
}

// resetOntoTree finishes r, the reset of c, a spare of src's children,
// onto mount, the early tree of the snapshot fs of src's live state (root
// mode; before is that snapshot but its layer), before the layer is
// hashed, and calls mounted once it no longer looks the tree up. The
// child is returned with its sessions reopened while the layer is
// hashed: until its config names the layer (fs.naming), its state is
// locked (stateMu), so that what reads its layers (a snapshot, a
// rollback, a fork of it) waits. Its lease is settleFork's.
func (e *Engine) resetOntoTree(ctx context.Context, c *Sandbox, r *sandbox.PendingReset, src forkSource, fs forkSnapshot, before snapshot, mount string, mounted func()) (*Sandbox, error) {
	st := e.cache.st()
	var layers []string
	for _, id := range before.rec.Base {
		layers = append(layers, st.TreePath(id))
	}
	owners, err := forkOwners(st, before, src.conf)
	if err != nil {
		mounted()
		r.Abort()
		c.discard()
		return nil, err
	}
	kept, err := r.Finish(ctx, sandbox.Deferred{Layers: append(layers, mount), Owners: owners})
	mounted() // a publication that fails waits for it before it removes the tree
	if err != nil {
		c.discard()
		e.log.Debug("a fork's spare not reset: starting the child", "from", src.what, "err", err)
		return nil, nil
	}
	created := c.sbox().Config() // the early tree's path until the layer is hashed
	if err := c.afterSpareReset(ctx, before, nil, &created, kept); err != nil {
		return nil, err
	}
	fs.naming.add(c, &created)
	return c, nil
}

// naming holds the children reset onto a fork's early tree before its
// layer was hashed, each with its state locked (stateMu), until their
// configs name the layer.
type naming struct {
	mu       sync.Mutex // guards the fields
	children []namingChild
	over     bool // name was called: snap, err
	snap     snapshot
	err      error
	done     chan struct{} // closed once name was called and its children named
}

type namingChild struct {
	c       *Sandbox
	created *sandbox.Config // c's record of its config at its creation
}

func newNaming() *naming { return &naming{done: make(chan struct{})} }

// add locks c's state until its config, and created, name the layer
// (at once when it is named already).
func (n *naming) add(c *Sandbox, created *sandbox.Config) {
	c.stateMu.Lock()
	n.mu.Lock()
	if !n.over {
		n.children = append(n.children, namingChild{c, created})
		n.mu.Unlock()
		return
	}
	snap, err := n.snap, n.err
	n.mu.Unlock()
	namingChild{c, created}.name(snap, err)
}

// name names snap's layer in the children's configs (err: it was not
// hashed; their fork closes them) and unlocks their state.
func (n *naming) name(snap snapshot, err error) {
	n.mu.Lock()
	cs := n.children
	n.children, n.over, n.snap, n.err = nil, true, snap, err
	n.mu.Unlock()
	for _, k := range cs {
		k.name(snap, err)
	}
	close(n.done)
}

// name names snap's layer in k's config and record of it, replacing
// the early tree's path, and unlocks k's state.
func (k namingChild) name(snap snapshot, err error) {
	defer k.c.stateMu.Unlock()
	if err != nil {
		return
	}
	layers := slices.Clone(k.created.Layers)
	layers[len(layers)-1] = k.c.e.cache.st().TreePath(snap.layer)
	if err := k.c.sbox().SetLayers(layers); err != nil { // not for want of a layer: cannot fail
		k.c.e.log.Error("a fork's child's layers not named", "sandbox", k.c.ID(), "err", err)
		return
	}
	k.c.mu.Lock()
	k.created.Layers = layers
	k.c.mu.Unlock()
}

// spareSession is the session a fork's spare starts with, in its root
// and environment: kept across the reset onto the snapshot
// (sandbox.Sandbox.ResetKeeping), its shell serves the child's first
// session (AdoptSession) where its state allows, so that no shell starts
// on the fork's path. The engine never lists it; a child that does not
// take it closes it.
const spareSession = "msb-spare"

// keepForkSpares has the spares of k made again after a fork of count
// children: as many as warm asks, else as the fork had. As after a
// create, the refill waits refillDelay: made at once, it took the CPU
// the children's first commands were answered with (fork → first
// command 1.1× the fork without spares in 3 alternated pairs, load 28).
func (e *Engine) keepForkSpares(k poolKey, req api.ForkRequest) {
	n := req.Warm
	if n <= 0 {
		n = max(req.Count, 1)
	}
	e.keepAfterCreate(k, n)
}
