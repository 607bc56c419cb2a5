package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/store"
	"github.com/minisandbox/msb/internal/task"
	"github.com/minisandbox/msb/internal/warm"
)

// The warm pool keeps sandboxes started ahead (spares), so that a create
// or a fork that matches one takes it ready instead of starting one. It is
// one warm.Pool for three kinds of key, the environment a spare is of:
//   - instance: a task sandbox of an instance (the task; an instance added
//     again is a new one), at its starting state;
//   - image: a raw sandbox on an image or Debian base (the root's top layer,
//     so a re-imported reference is another key), with its layers, workdir
//     and environment;
//   - snapshot: a child of a named snapshot forked from the snapshot alone;
//   - fork: a child of a live raw sandbox, before its root is put on the
//     parent's snapshot (forkspare.go): the parent's config.
//
// Instance and image keys carry the sandbox's shape too (limits, network,
// output cap): a create of another shape is another key. Sizes: a key
// has Config.SparesPerInstance spares once created (instance, image) or
// none until a fork asks (snapshot); a request's Warm sets its key's size.
// Config.Spares bounds all of them, made or being made.
//
// Quotas: a spare is admitted as the sandbox it stands for, without
// waiting, and holds its room while it waits, so spares never take the
// daemon over its quotas. They yield to real creates: a create or fork
// that finds no room closes spares (oldest first) until it fits, a spare
// is not admitted while a create waits in line, and one finished while a
// create waits is closed at once.
//
// A spare is not live for the API (not listed, not reaped) until taken;
// taking it gives it the request's labels and starts its lifetimes.

// Pool kinds, the classes of the pool's stats.
const (
	PoolInstance = "instance"
	PoolImage    = "image"
	PoolSnapshot = "snapshot"
	PoolFork     = "fork"
)

// poolKey is what makes spares interchangeable.
type poolKey struct {
	kind     string
	t        *task.Task    // instance
	snapshot string        // snapshot
	root     store.LayerID // image: the root's top layer
	image    string        // image: as the request named it
	layers   string        // image: the request's layers, joined by NUL
	env      string        // image: the request's env, joined by NUL
	workdir  string        // image
	sudo     string        // image: SandboxRequest.Sudo
	shape    string        // fork: the children's sandbox.Config in JSON
	// The shape (instance, image; limits for fork too).
	limits    sandbox.Limits
	network   string
	maxOutput int
}

// String names the key in logs.
func (k poolKey) String() string {
	switch k.kind {
	case PoolInstance:
		return "instance " + k.t.ID()
	case PoolImage:
		return "image " + k.image
	case PoolFork:
		return "fork"
	}
	return "snapshot " + k.snapshot
}

// request is the create a spare of an instance or image key stands for
// (labels, lifetimes and the like are given when it is taken).
func (k poolKey) request() SandboxRequest {
	req := SandboxRequest{Image: k.image, Workdir: k.workdir, Network: k.network, MaxOutput: k.maxOutput, Sudo: k.sudo}
	if k.t != nil {
		req.InstanceID = k.t.ID()
	}
	req.Layers, req.Env = split(k.layers), split(k.env)
	return req
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

// createKey is the key of a create (img: its image resolved, nil if none),
// and false for a create the pool does not serve: spares off, a raw
// sandbox on the host or bare layers, or a request that start would refuse
// (it must be refused, not served).
func (e *Engine) createKey(req SandboxRequest, img *resolvedRoot, limits sandbox.Limits) (poolKey, bool) {
	if e.cfg.Spares <= 0 || req.NetPolicy != nil { // a policy is not in the key
		return poolKey{}, false
	}
	k := poolKey{limits: limits, network: req.Network, maxOutput: req.MaxOutput}
	switch {
	case req.InstanceID != "":
		if len(req.Layers) > 0 || req.HostBase || req.Image != "" || len(req.Env) > 0 || req.Workdir != "" || req.Sudo != "" {
			return poolKey{}, false
		}
		t, err := e.task(req.InstanceID)
		if err != nil {
			return poolKey{}, false
		}
		k.kind, k.t = PoolInstance, t
	case req.Image != "" && !req.HostBase:
		if img == nil || img.name != req.Image {
			return poolKey{}, false
		}
		k.kind, k.root, k.image, k.workdir, k.sudo = PoolImage, img.root.Top(), req.Image, req.Workdir, req.Sudo
		k.layers, k.env = strings.Join(req.Layers, "\x00"), strings.Join(req.Env, "\x00")
	default:
		return poolKey{}, false
	}
	return k, true
}

func snapshotKey(name string) poolKey { return poolKey{kind: PoolSnapshot, snapshot: name} }

func (e *Engine) newPool() *warm.Pool[poolKey, *Sandbox] {
	per := max(e.cfg.SparesPerInstance, 1)
	return warm.New(warm.Options[poolKey, *Sandbox]{
		Make:  e.makeSpare,
		Close: (*Sandbox).discard,
		Alive: func(s *Sandbox) bool { return s.sbox().Alive() },
		Max:   e.cfg.Spares,
		Size: func(k poolKey) int {
			if k.kind == PoolSnapshot || k.kind == PoolFork {
				return 0 // until a fork asks
			}
			return per
		},
		Class:  func(k poolKey) string { return k.kind },
		Idle:   e.cfg.spareIdle(),
		Logger: e.log,
	})
}

// PoolStats reports the warm pool by kind (PoolInstance, PoolImage,
// PoolSnapshot; a kind appears once a key of it was looked for or kept).
func (e *Engine) PoolStats() map[string]warm.Stats { return e.spares.StatsBy() }

// Why a refill stops: no room for a spare within the quotas (it is not
// counted as a refused admission), or a spare finished while a create
// waited for room was closed to give it that room.
var (
	errNoRoom  = fmt.Errorf("%w: no room for a spare within the quotas", warm.ErrSkip)
	errYielded = fmt.Errorf("%w: closed for a create waiting for room", warm.ErrSkip)
)

// makeSpare starts a spare of k, admitted without waiting.
func (e *Engine) makeSpare(ctx context.Context, k poolKey) (*Sandbox, error) {
	l := k.limits
	if k.kind == PoolSnapshot {
		l = e.cfg.sandboxLimits(api.Limits{}) // as snapshotSource's
	}
	if !e.admit.fitsNow(e.cfg.memReserve(l), l.DiskBytes, agentClass) {
		return nil, errNoRoom
	}
	var s *Sandbox
	var err error
	switch k.kind {
	case PoolSnapshot:
		s, err = e.startSnapshotSpare(ctx, k.snapshot)
	case PoolFork:
		s, err = e.startForkSpare(ctx, k)
	default:
		s, err = e.startStandby(ctx, k)
	}
	if err != nil {
		return nil, err
	}
	if e.admit.agentsWaiting() {
		s.discard()
		return nil, errYielded
	}
	return s, nil
}

// standbySession is the name of a spare's session started ahead: one a
// client cannot give (api.CheckSessionName), renamed to the client's
// name when it opens its first session.
const standbySession = "-standby"

// startStandby starts the sandbox a create of k would, with its session
// shell started ahead where it can (an image may have no bash), so that
// the client's first session answers in a round trip instead of a
// shell's start (see Sandbox.openStandby).
func (e *Engine) startStandby(ctx context.Context, k poolKey) (*Sandbox, error) {
	if err := e.open(); err != nil {
		return nil, err
	}
	release, err := e.reserve(ctx, k.limits, -1, agentClass)
	if err != nil {
		return nil, err
	}
	s := &Sandbox{e: e, release: release, limits: k.limits, sessions: map[string]bool{}}
	if err := s.start(ctx, k.request(), nil, k.limits); err != nil {
		release()
		return nil, err
	}
	if err := s.sbox().OpenSession(ctx, standbySession, sandbox.SessionOptions{}); err != nil {
		if !s.sbox().Alive() {
			s.discard()
			return nil, fmt.Errorf("starting the spare's session: %w", err)
		}
		e.log.Debug("a spare without a session started ahead", "key", k, "err", err)
		return s, nil
	}
	s.standby = true
	return s, nil
}

// startSnapshotSpare starts one child of the named snapshot as a fork of
// it would.
func (e *Engine) startSnapshotSpare(ctx context.Context, name string) (*Sandbox, error) {
	src, snap, done, err := e.snapshotSource(ctx, name)
	if err != nil {
		return nil, err
	}
	defer done()
	return e.startChild(ctx, src, readySnapshot(snap))
}

// refillDelay is how long after a create its key's spares are made again:
// not beside the caller's first commands, which it would slow on a small
// machine (by 2.5 ms of 7.8 on two cores, msb bench api).
const refillDelay = 100 * time.Millisecond

// takeSpare is a spare of k, nil when none is ready.
func (e *Engine) takeSpare(k poolKey) *Sandbox {
	s, ok := e.spares.Take(k)
	if !ok {
		return nil
	}
	return s
}

// keepAfterCreate has k's spares made again (to n when n > 0) once the
// create has had refillDelay to itself.
func (e *Engine) keepAfterCreate(k poolKey, n int) {
	time.AfterFunc(refillDelay, func() { e.spares.Keep(k, n) })
}

// yieldFor closes spares, oldest first, until a sandbox of limits l fits
// or none is left: spares never keep a real create out.
func (e *Engine) yieldFor(l sandbox.Limits) {
	for !e.admit.fitsNow(e.cfg.memReserve(l), l.DiskBytes, agentClass) && e.spares.Shed() {
	}
}

// fitsNow says whether a sandbox of mem and disk would be admitted for
// class c now, nobody waiting ahead of it.
func (a *admission) fitsNow(mem, disk int64, c class) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	ok, _ := a.fits(mem, disk, c)
	return ok && !a.queued(c)
}

// agentsWaiting says whether an agent's sandbox waits for room.
func (a *admission) agentsWaiting() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.queued(agentClass)
}

// discard closes a sandbox that was never registered (a spare, a child
// whose start failed) and gives its room back.
func (s *Sandbox) discard() {
	s.closeOnce.Do(func() {
		s.closeErr = closeParts(s.parts())
		s.release()
	})
}
