package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/store"
	"github.com/minisandbox/msb/internal/task"
	"golang.org/x/sync/errgroup"
)

// MaxForkCount bounds ForkRequest.Count.
const MaxForkCount = 256

// Fork starts req.Count new sandboxes (children) from one state of a live
// sandbox: the named snapshot req.Snapshot, or else a snapshot of its live
// state taken now. Each child has its own writable layer over the
// snapshot's layers, the parent's limits, network, environment and
// labels (plus req.Labels), and the snapshot's sessions reopened in their
// recorded cwd and environment; no process of the parent is carried,
// unless req.Processes is api.ForkProcessesAll (forkprocs.go: root mode
// and criu; ErrProcessesUnsupported says why not). A
// child of a task sandbox is a task sandbox of the same instance. Each
// child is admitted as a create is, without waiting: ErrQuota (naming the
// limit) when there is no room, and then no child is left. Children of
// the live state start while its snapshot is taken (sandbox.Runtime.
// CreateDeferred): their roots are built once it is published. With
// spares (Config.Spares), a raw parent's children in root mode are taken
// from the spares of their shape where there are some, reset in place
// onto the snapshot (forkspare.go).
//
// With sandboxID empty, the children are forked from the named snapshot
// alone (its source may be gone): a task sandbox's snapshot gives task
// sandboxes of its instance, a raw one raw sandboxes with the source's
// root, working directory and user; limits and lifetimes are the engine's
// defaults, labels req.Labels.
func (e *Engine) Fork(ctx context.Context, sandboxID string, req api.ForkRequest) ([]*Sandbox, error) {
	return e.ForkSnapshot(ctx, sandboxID, req, SnapshotForkOptions{})
}

// SnapshotForkOptions change what the children of a fork of a named
// snapshot alone start with, in place of what Fork gives them (no
// network, the engine's lifetimes). The zero value changes nothing.
type SnapshotForkOptions struct {
	// Network and NetPolicy are the children's network, as
	// SandboxRequest's ("": none).
	Network   string
	NetPolicy *NetPolicy
	// Lifetime and IdleTimeout bound each child as SandboxRequest's do:
	// 0 the engine's defaults, negative none.
	Lifetime, IdleTimeout time.Duration
}

// ForkSnapshot is Fork with o applied to the children; o must be the
// zero value unless sandboxID is empty (a fork of the snapshot alone: a
// live parent's children keep its network and lifetimes). Children with
// a network are never taken from the spares of the snapshot, which have
// none.
func (e *Engine) ForkSnapshot(ctx context.Context, sandboxID string, req api.ForkRequest, o SnapshotForkOptions) ([]*Sandbox, error) {
	if err := checkFork(req); err != nil {
		return nil, err
	}
	custom := o != (SnapshotForkOptions{})
	spares := sandboxID == "" && o.Network == "" && o.NetPolicy == nil
	if custom && sandboxID != "" {
		return nil, fmt.Errorf("%w: a fork of sandbox %s keeps its network and lifetimes; options are for a fork of a snapshot alone", ErrBadRequest, sandboxID)
	}
	if req.Processes == api.ForkProcessesAll {
		return e.forkProcesses(ctx, sandboxID, req, o) // forkprocs.go
	}
	src, fs, done, err := e.forkSource(ctx, sandboxID, req.Snapshot)
	if err != nil {
		return nil, err
	}
	settled := false // done handed to settleFork
	defer func() {
		if !settled {
			done()
		}
	}()
	if custom {
		o.apply(e, &src)
	}
	labels := maps.Clone(src.info.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, req.Labels)
	src.info.Labels = labels
	fork, forkSpares := poolKey{}, false
	if p, err := e.Sandbox(sandboxID); err == nil && p.sbox().CanReset() == nil {
		fork, forkSpares = e.forkShape(src)
	}
	count := max(req.Count, 1)
	children := make([]*Sandbox, count)
	var g errgroup.Group
	g.SetLimit(forkWorkers)
	for i := range children {
		g.Go(func() error {
			c, err := e.takeOrFork(ctx, spares, req.Snapshot, src, fs, fork, forkSpares)
			if err != nil {
				return fmt.Errorf("forking %s (child %d of %d): %w", src.what, i+1, count, err)
			}
			children[i] = c
			return nil
		})
	}
	err = g.Wait()
	if err != nil {
		for _, c := range children {
			if c != nil {
				c.Close()
			}
		}
		if _, serr := fs.wait(); serr != nil { // what each child reported
			return nil, serr
		}
		return nil, err
	}
	e.log.Debug("forked", "from", src.what, "children", count)
	if fs.taking {
		settled = true
		go e.settleFork(src, fs, children, done)
	}
	if spares && e.cfg.Spares > 0 {
		e.spares.Keep(snapshotKey(req.Snapshot), req.Warm)
	}
	if forkSpares {
		e.keepForkSpares(fork, req)
	}
	return children, nil
}

// apply gives src, a snapshot's, the network and lifetimes o asks for.
func (o SnapshotForkOptions) apply(e *Engine, src *forkSource) {
	src.conf.Network, src.conf.NetPolicy = o.Network, o.NetPolicy
	lifetime, idle := pickDuration(o.Lifetime, e.cfg.Lifetime), pickDuration(o.IdleTimeout, e.cfg.IdleTimeout)
	src.info.LifetimeNs, src.info.IdleTimeoutNs = int64(lifetime), int64(idle)
}

// forkWorkers is how many children start at once: a start is mostly the
// kernel's work (namespaces, mounts, cgroup), which overlaps well.
const forkWorkers = 8

// forkSource is what children are made like.
type forkSource struct {
	what   string         // for messages: "sandbox ID", "snapshot NAME"
	conf   sandbox.Config // the layers aside
	task   *task.Task     // nil for raw sandboxes
	limits sandbox.Limits
	// info holds the children's instance, labels, limits, mode and
	// lifetimes.
	info api.SandboxInfo
	// parent, for a fork of a live state, is the sandbox whose snapshot
	// the children are made of.
	parent *Sandbox
}

// forkSnapshot is the snapshot a fork's children are made of: one that
// exists, or one being taken (taking) of the parent's live state while
// the first of them start (beside). wait returns it once it is there.
// early returns it as soon as children can mount it, with the path its
// layer is mounted from: an early tree's (forkearly.go), or "" for the
// layer's tree in its place (store.TreePath), which wait's is; call done
// once that path is mounted (or will not be).
type forkSnapshot struct {
	taking bool
	wait   func() (snapshot, error)
	early  func() (snap snapshot, mount string, done func(), err error)
	// tree, for a snapshot being taken, is early's path before the
	// layer is hashed, with the snapshot but its layer (mount "" when
	// there is none: then use early); hashed then returns the snapshot
	// once its layer is.
	tree func() (before snapshot, mount string, done func())
	// naming holds the children reset onto the tree until their configs
	// name its layer (forkspare.go).
	naming *naming
	beside *atomic.Int32 // children that started beside the snapshot
	// mounted: early gave an early tree (children lease it once it is
	// published).
	mounted *atomic.Bool
	// hold, for a snapshot with an early tree, holds its hash back
	// (holdHash).
	hold *hashHold
}

// holdHash holds the hash of the snapshot's layer, which starts once its
// early tree is handed out, back until the returned function is called
// (the spare a child takes is reset: childFromSpare); it must be called
// before early or wait.
func (fs forkSnapshot) holdHash() (release func()) {
	if fs.hold == nil {
		return func() {}
	}
	return fs.hold.take()
}

// maxBeside is how many children start beside their parent's snapshot;
// the others start once it is taken. The snapshot is on every child's
// path, and with more starts beside it than the CPUs left to them it
// takes longer (and the parent stays frozen longer) than the starts
// gain.
var maxBeside = int32(max(1, runtime.NumCPU()-1))

// startsBeside reports whether the next child starts beside the snapshot.
func (fs forkSnapshot) startsBeside() bool {
	return fs.taking && fs.beside.Add(1) <= maxBeside
}

// readySnapshot is snap as a forkSnapshot.
func readySnapshot(snap snapshot) forkSnapshot {
	return forkSnapshot{wait: func() (snapshot, error) { return snap, nil },
		early: func() (snapshot, string, func(), error) { return snap, "", func() {}, nil },
		tree:  func() (snapshot, string, func()) { return snap, "", func() {} }}
}

// snapshotBeside starts a snapshot of the parent's live state and
// returns it, and what releases its lease once it is taken. With
// early, the children may mount its layer's tree before it is published
// (forkearly.go).
func snapshotBeside(ctx context.Context, parent *Sandbox, early bool) (forkSnapshot, func()) {
	var snap snapshot
	var err error
	// The tree came, then the layer was hashed, then the snapshot was
	// taken (published, or failed).
	came, hashed, taken := make(chan struct{}), make(chan struct{}), make(chan struct{})
	et := earlyTree{users: new(mountsInFlight)}
	hold := new(hashHold)
	var before snapshot // but its layer: set before the tree comes
	mounted := new(atomic.Bool)
	var hooks *store.Early
	if early {
		hooks = &store.Early{
			Trees: func(trees []string) {
				et.path = trees[0]
				close(came)
				hold.wait() // the hash starts when Trees returns
			},
			Place: func() {
				testHookPlace()
				et.users.close()
			},
		}
	}
	go func() {
		defer close(taken)
		snap, err = parent.snapshotEarly(ctx, "", hooks, func(sn snapshot) { before = sn }, func(sn snapshot) {
			et.snap = sn
			close(hashed)
		})
	}()
	wait := func() (snapshot, error) {
		<-taken
		return snap, err
	}
	nothing := func() {}
	earlyWait := func() (snapshot, string, func(), error) {
		select {
		case <-hashed: // the tree came before
			if et.users.take() {
				mounted.Store(true)
				return et.snap, et.path, et.users.done, nil
			}
		case <-taken:
		}
		snap, err := wait()
		return snap, "", nothing, err
	}
	tree := func() (snapshot, string, func()) {
		select {
		case <-came:
			if et.users.take() {
				mounted.Store(true)
				return before, et.path, et.users.done
			}
		case <-taken:
		}
		return snapshot{}, "", nothing
	}
	n := newNaming()
	go func() {
		select {
		case <-hashed:
			n.name(et.snap, nil)
		case <-taken: // failed, or published without an early tree
			n.name(snap, err)
		}
	}()
	release := func() {
		if snap, err := wait(); err == nil {
			snap.lease.Release()
		}
	}
	return forkSnapshot{taking: true, wait: wait, early: earlyWait, tree: tree, naming: n, beside: new(atomic.Int32), mounted: mounted, hold: hold}, release
}

// settleFork waits, beside a fork's children, for the snapshot they were
// made of (fs, taken of src's live state) to be published, then gives
// each child a lease of its layers (those started on an early tree hold
// none) and calls done, which releases the snapshot's; a snapshot that
// failed closes the children, and so does a lease that failed for a
// child holding none (gc could remove the layers it runs on).
func (e *Engine) settleFork(src forkSource, fs forkSnapshot, children []*Sandbox, done func()) {
	defer done()
	snap, err := fs.wait()
	<-fs.naming.done // the children's configs name the layer
	if err != nil {
		e.log.Warn("a fork's snapshot failed after its children started on it: closing them", "from", src.what, "err", err)
		for _, c := range children {
			c.closeAs(api.SandboxClosed, "its fork's snapshot could not be committed: "+err.Error())
		}
		return
	}
	e.log.Debug("fork settled", "from", src.what, "layer", snap.layer.Short())
	if !fs.mounted.Load() {
		return // the children lease what they mount
	}
	for _, c := range children {
		err := testHookSettleLease()
		if err == nil {
			err = c.leaseLayers()
		}
		if err == nil {
			continue
		}
		c.mu.Lock()
		leased := c.lease != nil // it started on the published layer
		c.mu.Unlock()
		if leased {
			e.log.Warn("a fork's child keeps the lease it started with", "sandbox", c.ID(), "err", err)
			continue
		}
		e.log.Warn("closing a fork's child on the early tree: no lease of its layers", "sandbox", c.ID(), "err", err)
		c.closeAs(api.SandboxClosed, "its layers could not be leased after its fork: "+err.Error())
	}
}

// testHookSettleLease, in tests, fails settleFork's lease of a child's
// layers when it returns an error.
var testHookSettleLease = func() error { return nil }

// leaseLayers gives a raw sandbox a lease of the layers it runs on,
// replacing the one it holds; a closed one gets none.
func (s *Sandbox) leaseLayers() error {
	if s.tsk() != nil {
		return nil // its task holds its lease
	}
	st := s.e.cache.st()
	ids, err := layersOf(st, s.sbox().Config().Layers)
	if err != nil {
		return err
	}
	lease, err := st.Lease(context.Background(), ids...)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		lease.Release()
		return nil
	}
	old := s.lease
	s.lease = lease
	s.mu.Unlock()
	if old != nil {
		old.Release()
	}
	return nil
}

// forkSource finds what to fork: a live sandbox and a snapshot of it (the
// named one, or one of its live state, taken while the children start),
// or a named snapshot alone. done releases what keeps them.
func (e *Engine) forkSource(ctx context.Context, sandboxID, name string) (forkSource, forkSnapshot, func(), error) {
	src, snap, done, err := e.forkSourceOf(ctx, sandboxID, name)
	if err != nil || src.parent == nil {
		return src, readySnapshot(snap), done, err
	}
	// A raw parent's children in root mode mount the layer early: a task
	// sandbox's child's lease is its task's, and a rootless child's owners
	// and shifted layers are read from the published layer.
	fs, release := snapshotBeside(ctx, src.parent, src.task == nil && !e.rt.Rootless())
	return src, fs, release, nil
}

// forkSourceOf is forkSource but for a fork of a live state, whose
// snapshot it leaves to the caller: then src.parent is the sandbox.
func (e *Engine) forkSourceOf(ctx context.Context, sandboxID, name string) (forkSource, snapshot, func(), error) {
	nothing := func() {}
	if sandboxID == "" {
		if name == "" {
			return forkSource{}, snapshot{}, nothing, fmt.Errorf("%w: fork needs a sandbox or a snapshot", ErrBadRequest)
		}
		return e.snapshotSource(ctx, name)
	}
	parent, err := e.Sandbox(sandboxID)
	if err != nil {
		return forkSource{}, snapshot{}, nothing, err
	}
	parent.mu.Lock()
	src := forkSource{what: "sandbox " + sandboxID, limits: parent.limits}
	if parent.tsk() != nil {
		src.task = parent.tsk().Task
	}
	parent.mu.Unlock()
	// With its state: a child of a fork names its layer in its config
	// once hashed (forkspare.go).
	parent.stateMu.Lock()
	src.conf = parent.withPolicy(parent.sbox().Config())
	parent.stateMu.Unlock()
	// A child is another sandbox: its own host name (its id's), not the
	// one a rollback gave the parent to keep.
	src.conf.Hostname = ""
	src.info = parent.Info()
	if name == "" {
		src.parent = parent
		return src, snapshot{}, nothing, nil
	}
	snap, err := e.loadSnapshot(ctx, name)
	if err != nil {
		return forkSource{}, snapshot{}, nothing, err
	}
	if snap.rec.InstanceID != src.info.InstanceID {
		return forkSource{}, snapshot{}, nothing, fmt.Errorf("%w: snapshot %q is of instance %q, sandbox %s of %q", ErrBadRequest, name, snap.rec.InstanceID, sandboxID, src.info.InstanceID)
	}
	return src, snap, nothing, nil
}

// snapshotSource is the named snapshot alone as what to fork: a task
// snapshot's config is its instance's (its layers prepared, as a create
// does, for their binds and environment), a raw one's what it recorded:
// its working directory, environment and user (the owners a rootless
// user needs are forkOwners').
func (e *Engine) snapshotSource(ctx context.Context, name string) (forkSource, snapshot, func(), error) {
	nothing := func() {}
	snap, err := e.loadSnapshot(ctx, name)
	if err != nil {
		return forkSource{}, snapshot{}, nothing, err
	}
	limits := e.cfg.sandboxLimits(api.Limits{})
	lifetime, idle := pickDuration(0, e.cfg.Lifetime), pickDuration(0, e.cfg.IdleTimeout)
	src := forkSource{what: "snapshot " + name, limits: limits, info: api.SandboxInfo{InstanceID: snap.rec.InstanceID,
		Limits: apiLimits(limits), Mode: e.rt.Mode(), LifetimeNs: int64(lifetime), IdleTimeoutNs: int64(idle)}}
	src.conf = sandbox.Config{Workdir: snap.rec.Workdir, Env: snap.rec.Env, Limits: limits,
		User: sandbox.User{UID: snap.rec.User.UID, GID: snap.rec.User.GID}, Sudo: snap.rec.Sudo, ImageLayers: snap.rec.Image()}
	if snap.rec.InstanceID == "" {
		return src, snap, nothing, nil
	}
	t, err := e.task(snap.rec.InstanceID)
	if err != nil {
		return forkSource{}, snapshot{}, nothing, fmt.Errorf("snapshot %q: %w", name, err)
	}
	prep, err := e.env.Cache.Prepare(ctx, t.Instance, t.Spec, nil)
	if err != nil {
		return forkSource{}, snapshot{}, nothing, fmt.Errorf("snapshot %q: preparing instance %s: %w", name, t.ID(), err)
	}
	src.task, src.conf = t, prep.SandboxConfig()
	src.conf.Limits = limits
	return src, snap, func() { prep.Release() }, nil
}

func checkFork(req api.ForkRequest) error {
	if req.Count < 0 || req.Count > MaxForkCount {
		return fmt.Errorf("%w: fork count %d: give 1 to %d", ErrBadRequest, req.Count, MaxForkCount)
	}
	switch req.Processes {
	case "", api.ForkProcessesNone, api.ForkProcessesAll:
	default:
		return fmt.Errorf("%w: processes %q: give %q (the default) or %q", ErrBadRequest, req.Processes, api.ForkProcessesNone, api.ForkProcessesAll)
	}
	for k := range req.Labels {
		if k == "" {
			return fmt.Errorf("%w: a label with an empty name", ErrBadRequest)
		}
	}
	return nil
}

// takeOrFork is a child of snapshot name: a spare when fromSnapshot (a
// fork of the snapshot alone, its children without a network of their
// own) and one is ready; a spare of shape fork reset onto the snapshot
// when forkSpares (a fork of a live sandbox) and one is ready; else one
// started now.
func (e *Engine) takeOrFork(ctx context.Context, fromSnapshot bool, name string, src forkSource, fs forkSnapshot, fork poolKey, forkSpares bool) (*Sandbox, error) {
	var c *Sandbox
	var err error
	switch {
	case fromSnapshot && e.cfg.Spares > 0:
		c = e.takeSpare(snapshotKey(name))
	case forkSpares:
		c, err = e.childFromSpare(ctx, fork, src, fs)
	}
	if err != nil {
		return nil, err
	}
	if c == nil {
		return e.forkChild(ctx, src, fs)
	}
	if err := e.register(c, src.info); err != nil {
		return nil, err
	}
	return c, nil
}

// forkChild starts and registers one child of src over fs, spares
// yielding their room to it.
func (e *Engine) forkChild(ctx context.Context, src forkSource, fs forkSnapshot) (*Sandbox, error) {
	e.yieldFor(src.limits)
	c, err := e.startChild(ctx, src, fs)
	if err != nil {
		return nil, err
	}
	if err := e.register(c, src.info); err != nil {
		return nil, err
	}
	return c, nil
}

// startChild admits and starts one child of src over fs, its sessions
// reopened, without registering it.
func (e *Engine) startChild(ctx context.Context, src forkSource, fs forkSnapshot) (*Sandbox, error) {
	if err := e.open(); err != nil {
		return nil, err
	}
	release, err := e.reserve(ctx, src.limits, -1, agentClass)
	if err != nil {
		return nil, err
	}
	c := &Sandbox{e: e, release: release, limits: src.limits, sessions: map[string]bool{}}
	if fs.startsBeside() {
		err = c.startBeside(ctx, src.conf, src.task, fs.early)
	} else if snap, serr := fs.wait(); serr != nil {
		err = serr
	} else {
		err = c.startFrom(ctx, src.conf, src.task, snap)
	}
	if err != nil {
		release()
		return nil, err
	}
	snap, _, ended, _ := fs.early() // there: the child's root is made of it
	ended()
	c.info.ID = c.sbox().ID
	if err := c.reopenSessions(ctx, snap.sessions()); err != nil {
		c.discard()
		return nil, err
	}
	return c, nil
}

// register makes a started child live from now on, described as pi says
// (instance, labels, limits, mode, lifetimes): the engine lists, reaps
// and closes it.
func (e *Engine) register(c *Sandbox, pi api.SandboxInfo) error {
	now := time.Now()
	c.lastActive.Store(now.UnixNano())
	c.idle = time.Duration(pi.IdleTimeoutNs)
	c.info = api.SandboxInfo{ID: c.sbox().ID, InstanceID: pi.InstanceID, Labels: maps.Clone(pi.Labels), Limits: pi.Limits, Mode: pi.Mode,
		CreatedAt: now.UTC().Format(time.RFC3339Nano), State: api.SandboxRunning, LifetimeNs: pi.LifetimeNs, IdleTimeoutNs: pi.IdleTimeoutNs}
	if pi.LifetimeNs > 0 {
		c.deadline = now.Add(time.Duration(pi.LifetimeNs))
		c.info.ExpiresAt = c.deadline.UTC().Format(time.RFC3339Nano)
	}
	e.mu.Lock()
	closed := e.closed
	if !closed {
		e.sandboxes[c.info.ID] = c
	}
	e.mu.Unlock()
	if closed {
		c.Close()
		return ErrClosed
	}
	return nil
}

// startFrom starts the sandbox's processes from conf (a sandbox's config)
// over snap's layers, as a task sandbox of t when t is not nil. A raw
// sandbox's create opens the first of snap's sessions in its recorded
// cwd and variables (sandbox.Config.Session: the shell starts while the
// supervisor makes its threads, and no round trip follows); when that
// fails (the directory may be gone from the snapshot), the sandbox
// starts without it and reopenSessions opens it.
func (s *Sandbox) startFrom(ctx context.Context, conf sandbox.Config, t *task.Task, snap snapshot) error {
	var top *store.LayerID
	if snap.layer != (store.LayerID{}) {
		top = &snap.layer
	}
	paths, lease, err := s.e.layerPaths(ctx, snap.rec.Base, top)
	if err != nil {
		return err
	}
	fconf := forkConfig(conf, paths, snap.rec.HostBase)
	if fconf.Owners, err = forkOwners(s.e.cache.st(), snap, conf); err != nil {
		lease.Release()
		return err
	}
	var first *sandbox.SessionStart
	if sessions := snap.sessions(); t == nil && len(sessions) > 0 {
		ss := sessions[0]
		first = &sandbox.SessionStart{Name: ss.Name, SessionOptions: sandbox.SessionOptions{Env: ss.Env, Dir: ss.Cwd}}
	}
	fconf.Session = first
	err = s.create(ctx, fconf, t, lease)
	if err != nil && first != nil {
		s.e.log.Debug("a session not opened by the create: starting without it", "session", first.Name, "err", err)
		fconf.Session, first = nil, nil
		err = s.create(ctx, fconf, t, lease)
	}
	if err != nil {
		lease.Release()
		return err
	}
	if first != nil {
		s.markSession(first.Name)
	}
	created := s.sbox().Config()
	s.created = &created
	return nil
}

// startBeside starts the sandbox's processes from conf, a live sandbox's
// config, while snapOf's snapshot of that sandbox is taken
// (sandbox.Runtime.CreateDeferred): its init starts at once, and builds
// the root over the snapshot's layers once they can be mounted
// (forkSnapshot.early).
func (s *Sandbox) startBeside(ctx context.Context, conf sandbox.Config, t *task.Task, snapOf func() (snapshot, string, func(), error)) error {
	var held heldMount
	defer held.end() // the create returns once init mounted its root
	later := func(ctx context.Context) (sandbox.Deferred, *store.Lease, error) {
		snap, mount, mounted, err := snapOf()
		held.set(mounted)
		if err != nil {
			return sandbox.Deferred{}, nil, err
		}
		return s.e.forkRoot(ctx, snap, mount, conf)
	}
	// The snapshot records conf's host base (Sandbox.snapshot).
	fconf := forkConfig(conf, nil, conf.HostBase)
	fconf.Owners = nil
	if err := s.createDeferred(ctx, fconf, t, later); err != nil {
		return err
	}
	created := s.sbox().Config()
	s.created = &created
	return nil
}

// forkRoot is what a child of snap started as conf's sandbox is made of:
// its layers and owners, and a lease of them; with mount (an early
// tree's path, forkearly.go), its top layer is mounted from there and
// it gets no lease: the base's trees are its parent's, and the fork's
// snapshot leases them and the layer until settleFork leases them for
// the child.
func (e *Engine) forkRoot(ctx context.Context, snap snapshot, mount string, conf sandbox.Config) (sandbox.Deferred, *store.Lease, error) {
	st := e.cache.st()
	if mount != "" {
		base := make([]string, len(snap.rec.Base))
		for i, id := range snap.rec.Base {
			base[i] = st.TreePath(id)
		}
		owners, err := forkOwners(st, snap, conf)
		if err != nil {
			return sandbox.Deferred{}, nil, err
		}
		d := sandbox.Deferred{Owners: owners}
		d.Layers, d.Mount = earlyTree{snap: snap, path: mount}.layers(st, base)
		return d, nil, nil
	}
	paths, lease, err := e.layerPaths(ctx, snap.rec.Base, &snap.layer)
	if err != nil {
		return sandbox.Deferred{}, nil, err
	}
	d := sandbox.Deferred{Layers: paths}
	if d.Owners, err = forkOwners(st, snap, conf); err != nil {
		lease.Release()
		return sandbox.Deferred{}, nil, err
	}
	return d, lease, nil
}

// createDeferred is create with the layers, and the lease that keeps
// them, from later (task.StartDeferred, sandbox.Runtime.CreateDeferred).
func (s *Sandbox) createDeferred(ctx context.Context, conf sandbox.Config, t *task.Task, later func(context.Context) (sandbox.Deferred, *store.Lease, error)) error {
	if t != nil {
		ts, err := task.StartDeferred(ctx, s.e.env, t, conf, later)
		if err != nil {
			return err
		}
		s.setParts(ts.Sandbox, ts, nil)
		return nil
	}
	var lease *store.Lease
	sb, err := s.e.rt.CreateDeferred(ctx, conf, func(ctx context.Context) (sandbox.Deferred, error) {
		d, l, err := later(ctx)
		lease = l
		return d, err
	})
	if err != nil {
		if lease != nil {
			lease.Release()
		}
		return err
	}
	s.setParts(sb, nil, lease)
	return nil
}

// forkOwners are the owners a sandbox started as conf's user over snap's
// layers gives back (envcache.ImageOwners): those of the image below and
// those the snapshot's layer records, which a rootless store's trees lack.
// Without a user, or in root mode, conf's own.
func forkOwners(st *store.Store, snap snapshot, conf sandbox.Config) ([]sandbox.Owner, error) {
	if conf.User == (sandbox.User{}) || !st.Rootless() || snap.layer == (store.LayerID{}) {
		return conf.Owners, nil
	}
	return envcache.ImageOwners(st, append(slices.Clone(snap.rec.Base), snap.layer), conf.User)
}

// create starts the sandbox's processes from conf over the layers lease
// keeps: a task sandbox of t (which then owns the lease, and with the
// host's network a registry proxy of its own: task.Start), or a raw one.
// On an error lease is still the caller's.
func (s *Sandbox) create(ctx context.Context, conf sandbox.Config, t *task.Task, lease *store.Lease) error {
	if t != nil {
		ts, err := task.Start(ctx, s.e.env, t, conf, lease)
		if err != nil {
			return err
		}
		s.setParts(ts.Sandbox, ts, nil)
		return nil
	}
	sb, err := s.e.rt.Create(ctx, conf)
	if err != nil {
		return err
	}
	s.setParts(sb, nil, lease)
	return nil
}

// reopenSessions opens sessions as a snapshot recorded them, but those
// the sandbox has open.
func (s *Sandbox) reopenSessions(ctx context.Context, sessions []api.SnapshotSession) error {
	return s.reopenSessionsFrom(ctx, sessions, "")
}

// reopenSessionsFrom is reopenSessions with the first session opened
// with the shell of session from where it can (sandbox.Sandbox.
// AdoptSession: a spare's, kept across its reset); from is closed when
// no session took it.
func (s *Sandbox) reopenSessionsFrom(ctx context.Context, sessions []api.SnapshotSession, from string) error {
	var errs []error
	for _, ss := range sessions {
		if s.hasSession(ss.Name) { // opened by the create (startFrom)
			continue
		}
		if s.tsk() != nil {
			ss.Env = task.WithoutRegistryProxy(ss.Env)
		}
		open := func(opts sandbox.SessionOptions) error {
			if from == "" {
				return s.sbox().OpenSession(ctx, ss.Name, opts)
			}
			_, err := s.sbox().AdoptSession(ctx, ss.Name, from, opts)
			from = ""
			return err
		}
		err := open(sandbox.SessionOptions{Env: ss.Env, Dir: ss.Cwd})
		if err != nil && ss.Cwd != "" {
			// The directory may be gone from the snapshot (deleted under
			// the shell): open the session in the sandbox's default.
			err = open(sandbox.SessionOptions{Env: ss.Env})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reopening session %q: %w", ss.Name, err))
			continue
		}
		s.mu.Lock()
		s.sessions[ss.Name] = true
		s.mu.Unlock()
	}
	if from != "" { // unused: ended off the caller's path
		sb := s.sbox()
		go sb.CloseSession(context.Background(), from)
	}
	return errors.Join(errs...)
}
