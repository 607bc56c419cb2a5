package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
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
)

// ErrProcessesUnsupported: a fork asked to carry the parent's running
// processes (api.ForkProcessesAll) and cannot; the message says why
// (rootless, no usable criu, the parent's control socket outside its
// network namespace, ...). It is a bad request (400): the fork never
// falls back to children without the processes.
var ErrProcessesUnsupported = fmt.Errorf("%w: running processes cannot be carried", ErrBadRequest)

// findCriu finds the host's criu once (checkpoint.Find runs "criu check").
var findCriu = sync.OnceValues(func() (*checkpoint.Criu, error) {
	return checkpoint.Find(context.Background(), "")
})

// forkProcesses is Fork with req.Processes "all": the parent is frozen,
// its writes staged as a snapshot's layer and its processes dumped
// (checkpoint.Criu.DumpSandbox) in that one freeze, then thawed; each of
// req.Count children is restored from the one dump over the parent's
// layers and that one (sandbox.Runtime.Restore), admitted as a create.
// Its sessions are the parent's, going on; no spare is used.
func (e *Engine) forkProcesses(ctx context.Context, sandboxID string, req api.ForkRequest) ([]*Sandbox, error) {
	unsupported := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrProcessesUnsupported, fmt.Sprintf(format, args...))
	}
	switch {
	case sandboxID == "" || req.Snapshot != "":
		return nil, unsupported("processes are carried from a live sandbox's state, not from a named snapshot (it holds files only)")
	case e.rt.Rootless():
		return nil, unsupported("rootless: CRIU must suspend the sandbox's seccomp filter, which needs root (run msb as root)")
	}
	criu, err := findCriu()
	if err != nil {
		return nil, unsupported("%v", err)
	}
	parent, err := e.Sandbox(sandboxID)
	if err != nil {
		return nil, err
	}
	src, _, done, err := e.forkSourceOf(ctx, sandboxID, "")
	if err != nil {
		return nil, err
	}
	defer done()
	switch {
	case src.task != nil:
		return nil, unsupported("sandbox %s is a task sandbox (its children are its instance's, started anew); fork a raw sandbox", sandboxID)
	case src.conf.Network == sandbox.NetworkFiltered:
		return nil, unsupported("sandbox %s is on a filtered network, whose forwarder runs outside it", sandboxID)
	case parent.sbox().FreezerDir() == "":
		return nil, unsupported("sandbox %s has no cgroup freezer to hold it still for the dump", sandboxID)
	}
	if err := checkpoint.CheckDumpable(parent.sbox()); err != nil {
		return nil, unsupported("%v", err)
	}
	labels := maps.Clone(src.info.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, req.Labels)
	src.info.Labels = labels

	dir, err := os.MkdirTemp(e.rt.StateDir(), ".fork-dump-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	t0 := time.Now()
	snap, err := parent.snapshotDumping(ctx, func(sb *sandbox.Sandbox) error {
		_, err := criu.DumpSandbox(ctx, sb, dir)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("forking %s with its processes: %w", src.what, err)
	}
	defer snap.lease.Release()
	restorer, err := criu.Restorer(dir)
	if err != nil {
		return nil, err
	}
	parent.mu.Lock()
	sessions := slices.Sorted(maps.Keys(parent.sessions))
	parent.mu.Unlock()
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

// snapshotDumping takes an unnamed snapshot of the sandbox's writable
// layer as snapshot does, and calls dump in the same freeze, once the
// layer is read: the dumped processes and the layer are one state. The
// sessions are not asked for their state (a probe the freeze caught
// would be dumped halfway): the processes carry them.
func (s *Sandbox) snapshotDumping(ctx context.Context, dump func(*sandbox.Sandbox) error) (snapshot, error) {
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
	info := api.SnapshotInfo{Layer: data.ID.String(), Sandbox: s.ID(), InstanceID: s.info.InstanceID,
		CreatedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	snap := snapshot{layer: data.ID, rec: rootfs.SnapshotRecord{SnapshotInfo: info, Base: base, HostBase: conf.HostBase,
		Workdir: conf.Workdir, Env: conf.Env, User: rootfs.SnapshotUser{UID: conf.User.UID, GID: conf.User.GID}}}
	snap.rec.Sudo = conf.Sudo
	snap.created = data.Created()
	if err := s.publish(ctx, &snap, data, nil); err != nil {
		return snapshot{}, err
	}
	return snap, nil
}

// stageDumping stages the writable layer in dir with the sandbox frozen,
// then calls dump while it still is, and thaws it on every path.
func (s *Sandbox) stageDumping(ctx context.Context, dir string, parents []store.LayerID, dump func(*sandbox.Sandbox) error) (staged *store.Staged, err error) {
	sb := s.sbox()
	thaw, err := sb.Freeze(ctx)
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
		if errors.Is(err, checkpoint.ErrControlOutside) {
			err = fmt.Errorf("%w: %w", ErrProcessesUnsupported, err)
		}
		return nil, fmt.Errorf("dumping the processes of sandbox %s: %w", s.ID(), err)
	}
	return staged, nil
}
