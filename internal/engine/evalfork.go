package engine

import (
	"context"
	"sync"

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
// canary's child is admitted as separate's sandbox is).
func (e *Engine) evalFork(ctx context.Context, ts *task.Sandbox) (task.ForkPoint, error) {
	s := &Sandbox{e: e, sessions: map[string]bool{}, info: api.SandboxInfo{ID: ts.ID, InstanceID: ts.Task.ID()}}
	s.setParts(ts.Sandbox, ts, nil)
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
	return task.ForkPoint{Start: start, Release: sync.OnceFunc(func() { snap.lease.Release() })}, nil
}
