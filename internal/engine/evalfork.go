package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/task"
)

// evalFork is the forked canary mode's fork (task.EvalOptions.Fork): an
// unnamed snapshot of an evaluation's sandbox (its processes frozen while
// its writable layer is committed, as Fork's), whose children are fresh
// task sandboxes of its task with its config (limits, network,
// environment, user), each with a host name of its own and a lease of
// its own on the layers. The evaluation's sandbox is not registered: no
// one else sees it or its children, and admission is the evaluation's
// (the children replace the sandbox, which closes once forked; the
// canary's child is admitted as separate's sandbox is). Release drops
// the snapshot's layer from the store once its children are closed
// (store.Drop), unless someone else holds it (the same content forked
// by an evaluation of the same row at the same time, a named snapshot).
func (e *Engine) evalFork(ctx context.Context, ts *task.Sandbox) (task.ForkPoint, error) {
	s := &Sandbox{e: e, sessions: map[string]bool{}, info: api.SandboxInfo{ID: ts.ID, InstanceID: ts.Task.ID()}}
	s.setParts(ts.Sandbox, ts, nil)
	st := e.cache.st()
	mark, err := st.Mark()
	if err != nil {
		return task.ForkPoint{}, err
	}
	snap, err := s.snapshot(ctx, "")
	if err != nil {
		return task.ForkPoint{}, err
	}
	snap.sessions() // none to record: this gives the state lock back
	conf := ts.Config()
	start := func(ctx context.Context) (*task.Sandbox, error) {
		paths, lease, err := e.layerPaths(ctx, snap.rec.Base, &snap.layer)
		if err != nil {
			return nil, err
		}
		fconf := forkConfig(conf, paths, snap.rec.HostBase)
		fconf.Hostname = ""
		if fconf.Owners, err = forkOwners(e.cache.st(), snap, conf); err != nil {
			lease.Release()
			return nil, err
		}
		child, err := task.Start(ctx, e.env, ts.Task, fconf, lease)
		if err != nil {
			lease.Release()
			return nil, err
		}
		return child, nil
	}
	release := func() string {
		snap.lease.Release()
		ctx, cancel := context.WithTimeout(context.Background(), dropWait)
		defer cancel()
		r, err := st.Drop(ctx, snap.layer, mark, snap.created)
		switch {
		case err != nil:
			return fmt.Sprintf("Set-up's layer %s left to gc: %v", snap.layer.Short(), err)
		case r.Kept != "":
			return fmt.Sprintf("Set-up's layer %s kept in the store: %s", snap.layer.Short(), r.Kept)
		}
		return fmt.Sprintf("Set-up's layer %s dropped from the store (%d objects, %d bytes freed)", snap.layer.Short(), r.Objects, r.FreedBytes)
	}
	return task.ForkPoint{Start: start, Release: sync.OnceValue(release)}, nil
}

// dropWait bounds how long an evaluation's end waits for the store's
// lock to drop its set-up's layer (a build commits under the lock): past
// it the layer is left to gc.
const dropWait = 30 * time.Second
