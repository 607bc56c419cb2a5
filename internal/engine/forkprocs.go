package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/checkpoint"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/store"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// ErrProcessesUnsupported: a fork asked to carry the parent's running
// processes (api.ForkProcessesAll) and cannot; the message says why
// (rootless, no usable criu, the parent's control socket outside its
// network namespace, a TCP socket criu cannot dump here, ...). It is a
// bad request (400): the fork never falls back to children without the
// processes.
var ErrProcessesUnsupported = fmt.Errorf("%w: running processes cannot be carried", ErrBadRequest)

// findCriu finds the host's criu once (checkpoint.Find runs "criu check").
var findCriu = sync.OnceValues(func() (*checkpoint.Criu, error) {
	return checkpoint.Find(context.Background(), "")
})

// unsupported is an ErrProcessesUnsupported saying why.
func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProcessesUnsupported, fmt.Sprintf(format, args...))
}

// dumpable checks that the processes of sandbox id can be dumped here
// and returns the criu to do it with, the sandbox, and what its children
// are made like (done releases it).
func (e *Engine) dumpable(ctx context.Context, sandboxID string) (*checkpoint.Criu, *Sandbox, forkSource, func(), error) {
	nothing := func() {}
	criu, err := e.findCriu()
	if err != nil {
		return nil, nil, forkSource{}, nothing, err
	}
	parent, err := e.Sandbox(sandboxID)
	if err != nil {
		return nil, nil, forkSource{}, nothing, err
	}
	src, _, done, err := e.forkSourceOf(ctx, sandboxID, "")
	if err != nil {
		return nil, nil, forkSource{}, nothing, err
	}
	switch {
	case src.task != nil:
		err = unsupported("sandbox %s is a task sandbox (its children are its instance's, started anew); fork a raw sandbox", sandboxID)
	case src.conf.Network == sandbox.NetworkFiltered:
		err = unsupported("sandbox %s is on a filtered network, whose forwarder runs outside it", sandboxID)
	case parent.sbox().FreezerDir() == "":
		err = unsupported("sandbox %s has no cgroup freezer to hold it still for the dump", sandboxID)
	default:
		cerr := checkpoint.CheckDumpable(parent.sbox())
		if cerr == nil {
			cerr = criu.CheckSockets(parent.sbox())
		}
		if cerr != nil {
			err = unsupported("%v", cerr)
		}
	}
	if err != nil {
		done()
		return nil, nil, forkSource{}, nothing, err
	}
	return criu, parent, src, done, nil
}

// findCriu is the host's criu, or why there is none or processes cannot
// be carried by this engine (rootless).
func (e *Engine) findCriu() (*checkpoint.Criu, error) {
	if e.rt.Rootless() {
		return nil, unsupported("rootless: CRIU must suspend the sandbox's seccomp filter, which needs root (run msb as root)")
	}
	criu, err := findCriu()
	if err != nil {
		return nil, unsupported("%v", err)
	}
	return criu, nil
}

// forkProcesses is Fork with req.Processes "all". Of a live sandbox
// (req.Snapshot empty): the parent is frozen, its writes staged as a
// snapshot's layer and its processes dumped (checkpoint.Criu.
// DumpSandbox) in that one freeze, then thawed. Of a named snapshot
// (sandboxID empty or not): the dump SnapshotProcesses kept with it. Each
// of req.Count children is restored from the one dump over the source's
// layers and the snapshot's (sandbox.Runtime.Restore), admitted as a
// create; its sessions are the parent's, going on. No spare is used.
// o applies to the children of a snapshot alone, but for a filtered
// network or a policy: a child's network namespace is the one its
// processes were dumped in (o.Network "none" or "host" only names it).
func (e *Engine) forkProcesses(ctx context.Context, sandboxID string, req api.ForkRequest, o SnapshotForkOptions) ([]*Sandbox, error) {
	if req.Snapshot != "" {
		return e.forkDumped(ctx, sandboxID, req, o)
	}
	if sandboxID == "" {
		return nil, fmt.Errorf("%w: fork needs a sandbox or a snapshot", ErrBadRequest)
	}
	criu, parent, src, done, err := e.dumpable(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	defer done()
	dir, unlock, err := e.cache.newDump() // swept if msb dies with it
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	defer unlock()
	snap, err := parent.snapshotDumping(ctx, "", func(sb *sandbox.Sandbox) error {
		_, err := criu.DumpSandbox(ctx, sb, dir)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("forking %s with its processes: %w", src.what, err)
	}
	defer snap.lease.Release()
	parent.mu.Lock()
	sessions := slices.Sorted(maps.Keys(parent.sessions))
	parent.mu.Unlock()
	return e.restoreChildren(ctx, criu, dir, src, snap, sessions, req)
}

// forkDumped is forkProcesses of the named snapshot req.Snapshot, from
// the dump kept with it.
func (e *Engine) forkDumped(ctx context.Context, sandboxID string, req api.ForkRequest, o SnapshotForkOptions) ([]*Sandbox, error) {
	criu, err := e.findCriu()
	if err != nil {
		return nil, err
	}
	e.sweepDumps()
	dir := e.dumpDir(req.Snapshot)
	// Held while the children are restored from it: a sweep, after the
	// snapshot is deleted, leaves the dump alone. A dump swept before
	// has no snapshot left, which forkSourceOf says.
	if unlock, err := lockDump(dir, unix.LOCK_SH); err == nil {
		defer unlock()
	}
	src, snap, done, err := e.forkSourceOf(ctx, sandboxID, req.Snapshot)
	if err != nil {
		return nil, err
	}
	defer done()
	if _, err := os.Stat(filepath.Join(dir, checkpoint.ManifestName)); err != nil {
		return nil, unsupported("snapshot %q holds files only: it was taken without processes \"all\"", req.Snapshot)
	}
	if src.task != nil {
		return nil, unsupported("snapshot %q is of a task sandbox", req.Snapshot)
	}
	if o.Network == sandbox.NetworkFiltered || o.NetPolicy != nil {
		return nil, unsupported("a child restored from snapshot %q keeps the network namespace its processes were dumped in: no filtered network or policy", req.Snapshot)
	}
	if o != (SnapshotForkOptions{}) {
		o.apply(e, &src)
	}
	var sessions []string
	for _, ss := range snap.rec.Sessions {
		sessions = append(sessions, ss.Name)
	}
	return e.restoreChildren(ctx, criu, dir, src, snap, sessions, req)
}

// restoreChildren restores the dump in dir into req.Count children of
// src over snap, labelled as req says, and registers them; on an error
// none is left.
func (e *Engine) restoreChildren(ctx context.Context, criu *checkpoint.Criu, dir string, src forkSource, snap snapshot, sessions []string, req api.ForkRequest) ([]*Sandbox, error) {
	t0 := time.Now()
	labels := maps.Clone(src.info.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, req.Labels)
	src.info.Labels = labels
	restorer, err := criu.Restorer(dir)
	if err != nil {
		return nil, err
	}
	count := max(req.Count, 1)
	children := make([]*Sandbox, count)
	var g errgroup.Group
	g.SetLimit(forkWorkers)
	for i := range children {
		g.Go(func() error {
			c, err := e.restoreChild(ctx, src, snap, restorer, sessions)
			if err == nil {
				err = e.register(c, src.info)
			}
			if err != nil {
				return fmt.Errorf("forking %s with its processes (child %d of %d): %w", src.what, i+1, count, err)
			}
			children[i] = c
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		for _, c := range children {
			if c != nil {
				c.Close()
			}
		}
		return nil, err
	}
	e.log.Debug("forked with processes", "from", src.what, "children", count, "layer", snap.layer.Short(), "took", time.Since(t0))
	return children, nil
}

// SnapshotProcesses is Snapshot with req.Processes "all" (Snapshot
// itself takes files only): the sandbox's writes become the named
// snapshot's layer and its processes are dumped in the same freeze; the
// dump is kept with the snapshot, in the cache dir (dumps/NAME), and a
// fork of the snapshot with processes "all" restores it, also once the
// sandbox is closed (E2B's pause and resume). Its sessions are recorded
// by name only (a fork without processes opens them in the defaults). A
// dump whose snapshot is deleted is removed by the next call that looks
// or the cache's gc (sweepDumps), once no fork restores from it. The
// refusals are forkProcesses'.
func (e *Engine) SnapshotProcesses(ctx context.Context, sandboxID string, req api.SnapshotRequest) (api.SnapshotInfo, error) {
	name := req.Name
	if name == "" {
		name = "snap-" + sandboxID + "-" + time.Now().UTC().Format("20060102T150405.000000000")
	}
	if !rootfs.ValidSnapshotName(name) {
		return api.SnapshotInfo{}, fmt.Errorf("%w: snapshot name %q: use letters, digits and ._@+=:,~- (at most 128, starting with a letter or digit)", ErrBadRequest, name)
	}
	criu, parent, _, done, err := e.dumpable(ctx, sandboxID)
	if err != nil {
		return api.SnapshotInfo{}, err
	}
	defer done()
	// The name is taken as a snapshot of files takes it: one of that
	// name being taken has no ref yet.
	end, err := e.reserveSnapshot(name)
	if err != nil {
		return api.SnapshotInfo{}, err
	}
	defer end(nil) // published with its dump kept, or not: the store says
	if _, err := e.cache.st().Ref(rootfs.SnapshotRef(name)); err == nil {
		return api.SnapshotInfo{}, fmt.Errorf("%w: %q", ErrSnapshotExists, name)
	}
	e.sweepDumps()
	tmp, unlock, err := e.cache.newDump()
	if err != nil {
		return api.SnapshotInfo{}, err
	}
	defer os.RemoveAll(tmp)
	defer unlock()
	snap, err := parent.snapshotDumping(ctx, name, func(sb *sandbox.Sandbox) error {
		_, err := criu.DumpSandbox(ctx, sb, tmp)
		return err
	})
	if err != nil {
		return api.SnapshotInfo{}, err
	}
	snap.lease.Release()
	dir := e.dumpDir(name)
	if old, err := lockDump(dir, unix.LOCK_EX); err == nil {
		// Of a snapshot of that name deleted before, once no fork
		// restores from it.
		os.RemoveAll(dir)
		old()
	}
	if err := os.Rename(tmp, dir); err != nil {
		return api.SnapshotInfo{}, fmt.Errorf("keeping the dump of snapshot %q: %w", name, err)
	}
	e.log.Debug("snapshot taken with processes", "sandbox", sandboxID, "snapshot", name, "layer", snap.layer.Short())
	return snap.rec.SnapshotInfo, nil
}

// dumpDir is where the dump of named snapshot name is kept.
func (e *Engine) dumpDir(name string) string { return filepath.Join(e.cache.dumpsDir(), name) }

// sweepDumps removes the kept dumps whose snapshots are gone (Cache.
// sweepDumps; the cache's gc does too).
func (e *Engine) sweepDumps() { e.cache.sweepDumps() }

// restoreChild admits one child of src and restores the dump into it
// (restorer) over src's layers and snap's, its sessions those named.
func (e *Engine) restoreChild(ctx context.Context, src forkSource, snap snapshot, restorer sandbox.Restorer, sessions []string) (*Sandbox, error) {
	if err := e.open(); err != nil {
		return nil, err
	}
	e.yieldFor(src.limits)
	release, err := e.reserve(ctx, src.limits, -1, agentClass)
	if err != nil {
		return nil, err
	}
	c := &Sandbox{e: e, release: release, limits: src.limits, sessions: map[string]bool{}}
	paths, lease, err := e.layerPaths(ctx, snap.rec.Base, &snap.layer)
	if err != nil {
		release()
		return nil, err
	}
	conf := forkConfig(src.conf, paths, snap.rec.HostBase)
	conf.Session, conf.Stdio = nil, nil
	sb, err := e.rt.Restore(ctx, conf, restorer)
	if err != nil {
		lease.Release()
		release()
		return nil, err
	}
	c.setParts(sb, nil, lease)
	created := sb.Config()
	c.created = &created
	c.info.ID = sb.ID
	for _, n := range sessions {
		c.markSession(n)
	}
	return c, nil
}

// snapshotDumping takes a snapshot (named name, or unnamed) of the
// sandbox's writable layer as snapshot does, and calls dump in the same
// freeze, once the layer is read: the dumped processes and the layer are
// one state. The sessions are not asked for their state (a probe the
// freeze caught would be dumped halfway): the processes carry them, and
// a named snapshot records their names only.
func (s *Sandbox) snapshotDumping(ctx context.Context, name string, dump func(*sandbox.Sandbox) error) (snapshot, error) {
	done := s.use()
	defer done()
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	st := s.e.cache.st()
	conf := s.sbox().Config()
	base, err := layersOf(st, conf.Layers)
	if err == nil {
		err = s.e.settling.wait(ctx, base...) // a fork's child's layers: published
	}
	if err != nil {
		return snapshot{}, err
	}
	dir, err := s.sbox().WritableDir()
	if err != nil {
		return snapshot{}, fmt.Errorf("%w: %w", ErrSnapshotUnsupported, err)
	}
	parents := slices.Clone(base)
	slices.Reverse(parents) // topmost first
	data, err := s.stageDumping(ctx, dir, parents, dump)
	if err != nil {
		return snapshot{}, err
	}
	if err := data.WriteOut(ctx); err != nil {
		data.Discard()
		return snapshot{}, fmt.Errorf("committing the writable layer of sandbox %s: %w", s.ID(), err)
	}
	snap := s.snapshotOf(name, data, base, conf)
	s.mu.Lock()
	sessions := api.List[api.SnapshotSession]{}
	for _, n := range slices.Sorted(maps.Keys(s.sessions)) {
		sessions = append(sessions, api.SnapshotSession{Name: n})
	}
	s.mu.Unlock()
	snap.probe = func() api.List[api.SnapshotSession] { return sessions }
	if err := s.publish(ctx, &snap, data, nil); err != nil {
		return snapshot{}, err
	}
	return snap, nil
}

// stageDumping stages the writable layer in dir with the sandbox frozen
// as criu can seize it (checkpoint.FreezeForDump: no vfork child caught
// before its exec), then calls dump while it still is, and thaws it on
// every path.
func (s *Sandbox) stageDumping(ctx context.Context, dir string, parents []store.LayerID, dump func(*sandbox.Sandbox) error) (staged *store.Staged, err error) {
	sb := s.sbox()
	thaw, err := checkpoint.FreezeForDump(ctx, sb)
	defer func() {
		if terr := thaw(); terr != nil && err == nil {
			staged.Discard()
			staged, err = nil, terr
		}
	}()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSnapshotUnsupported, err)
	}
	staged, err = s.e.cache.st().StageDir(ctx, dir, store.CommitOptions{Parents: parents, MapOwner: envcache.OwnerAsRoot(), HoldBytes: snapshotHold, HashLater: true})
	if err != nil {
		return nil, fmt.Errorf("committing the writable layer of sandbox %s: %w", s.ID(), err)
	}
	if err := dump(sb); err != nil {
		staged.Discard()
		if errors.Is(err, checkpoint.ErrControlOutside) || errors.Is(err, checkpoint.ErrInetSockets) {
			err = fmt.Errorf("%w: %w", ErrProcessesUnsupported, err)
		}
		return nil, fmt.Errorf("dumping the processes of sandbox %s: %w", s.ID(), err)
	}
	return staged, nil
}
