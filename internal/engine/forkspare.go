package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/sandbox"
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
// spare is closed and the caller starts the child).
func (e *Engine) childFromSpare(ctx context.Context, k poolKey, src forkSource, fs forkSnapshot) (*Sandbox, error) {
	c := e.takeSpare(k)
	if c == nil {
		return nil, nil
	}
	snap, mount, mounted, err := fs.early()
	defer mounted()
	if err != nil {
		c.discard()
		return nil, err
	}
	if snap.rec.HostBase != src.conf.HostBase { // a named snapshot of another base
		c.discard()
		return nil, nil
	}
	c.info.ID = c.sbox().ID
	d, lease, err := e.forkRoot(ctx, snap, mount, src.conf)
	if err != nil {
		c.discard()
		return nil, err
	}
	kept, err := c.sbox().ResetKeeping(ctx, d, spareSession)
	if err != nil {
		lease.Release()
		c.discard()
		e.log.Debug("a fork's spare not reset: starting the child", "from", src.what, "err", err)
		return nil, nil
	}
	created := c.sbox().Config()
	if err := c.afterReset(lease, &created); err != nil {
		c.discard()
		return nil, err
	}
	from := ""
	if kept {
		from = spareSession
	}
	if err := c.reopenSessionsFrom(ctx, snap.sessions(), from); err != nil {
		c.discard()
		return nil, err
	}
	return c, nil
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
