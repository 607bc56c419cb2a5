package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/store"
	"github.com/minisandbox/msb/internal/task"
)

// MaxForkCount bounds ForkRequest.Count.
const MaxForkCount = 256

// Fork starts req.Count new sandboxes (children) from one state of a live
// sandbox: the named snapshot req.Snapshot, or else a snapshot of its live
// state taken now. Each child has its own writable layer over the
// snapshot's layers, the parent's limits, network, environment and
// labels (plus req.Labels), and the snapshot's sessions reopened in their
// recorded cwd and environment; no process of the parent is carried. A
// child of a task sandbox is a task sandbox of the same instance. Each
// child is admitted as a create is, without waiting: ErrQuota (naming the
// limit) when there is no room, and then no child is left.
func (e *Engine) Fork(ctx context.Context, sandboxID string, req api.ForkRequest) ([]*Sandbox, error) {
	if err := checkFork(req); err != nil {
		return nil, err
	}
	parent, err := e.Sandbox(sandboxID)
	if err != nil {
		return nil, err
	}
	var snap snapshot
	if req.Snapshot != "" {
		if snap, err = e.loadSnapshot(ctx, req.Snapshot); err != nil {
			return nil, err
		}
		if snap.rec.InstanceID != parent.info.InstanceID {
			return nil, fmt.Errorf("%w: snapshot %q is of instance %q, sandbox %s of %q", ErrBadRequest, req.Snapshot, snap.rec.InstanceID, sandboxID, parent.info.InstanceID)
		}
	} else {
		if snap, err = parent.snapshot(ctx); err != nil {
			return nil, err
		}
		defer snap.lease.Release()
	}
	labels := maps.Clone(parent.Info().Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, req.Labels)
	count := max(req.Count, 1)
	children := make([]*Sandbox, 0, count)
	for range count {
		c, err := e.forkChild(ctx, parent, snap, labels)
		if err != nil {
			for _, c := range children {
				c.Close()
			}
			return nil, fmt.Errorf("forking sandbox %s (child %d of %d): %w", sandboxID, len(children)+1, count, err)
		}
		children = append(children, c)
	}
	e.log.Debug("sandbox forked", "sandbox", sandboxID, "children", count, "layer", snap.layer.Short())
	return children, nil
}

func checkFork(req api.ForkRequest) error {
	if req.Count < 0 || req.Count > MaxForkCount {
		return fmt.Errorf("%w: fork count %d: give 1 to %d", ErrBadRequest, req.Count, MaxForkCount)
	}
	if req.Processes != "" && req.Processes != api.ForkProcessesNone {
		return fmt.Errorf("%w: processes %q: only %q is supported (running processes are not carried: CRIU is not used)", ErrBadRequest, req.Processes, api.ForkProcessesNone)
	}
	for k := range req.Labels {
		if k == "" {
			return fmt.Errorf("%w: a label with an empty name", ErrBadRequest)
		}
	}
	return nil
}

// forkChild starts and registers one child of parent over snap.
func (e *Engine) forkChild(ctx context.Context, parent *Sandbox, snap snapshot, labels map[string]string) (*Sandbox, error) {
	if err := e.open(); err != nil {
		return nil, err
	}
	release, err := e.reserve(ctx, parent.limits, -1, agentClass)
	if err != nil {
		return nil, err
	}
	c := &Sandbox{e: e, release: release, limits: parent.limits, sessions: map[string]bool{}}
	if err := c.startFrom(ctx, parent.sb.Config(), parent.task, snap); err != nil {
		release()
		return nil, err
	}
	now := time.Now()
	c.lastActive.Store(now.UnixNano())
	pi := parent.Info()
	c.deadline, c.idle = time.Time{}, time.Duration(pi.IdleTimeoutNs)
	c.info = api.SandboxInfo{ID: c.sb.ID, InstanceID: pi.InstanceID, Labels: maps.Clone(labels), Limits: pi.Limits, Mode: pi.Mode,
		CreatedAt: now.UTC().Format(time.RFC3339Nano), State: api.SandboxRunning, LifetimeNs: pi.LifetimeNs, IdleTimeoutNs: pi.IdleTimeoutNs}
	if pi.LifetimeNs > 0 {
		c.deadline = now.Add(time.Duration(pi.LifetimeNs))
		c.info.ExpiresAt = c.deadline.UTC().Format(time.RFC3339Nano)
	}
	if err := c.reopenSessions(ctx, snap.rec.Sessions); err != nil {
		c.Close()
		return nil, err
	}
	e.mu.Lock()
	closed := e.closed
	if !closed {
		e.sandboxes[c.info.ID] = c
	}
	e.mu.Unlock()
	if closed {
		c.Close()
		return nil, ErrClosed
	}
	return c, nil
}

// startFrom starts the sandbox's processes from conf (a sandbox's config)
// over snap's layers, as a task sandbox of t's task when t is not nil.
func (s *Sandbox) startFrom(ctx context.Context, conf sandbox.Config, t *task.Sandbox, snap snapshot) error {
	var top *store.LayerID
	if snap.layer != (store.LayerID{}) {
		top = &snap.layer
	}
	paths, lease, err := s.e.layerPaths(ctx, snap.rec.Base, top)
	if err != nil {
		return err
	}
	sb, err := s.e.rt.Create(ctx, forkConfig(conf, paths, snap.rec.HostBase))
	if err != nil {
		lease.Release()
		return err
	}
	s.sb, s.task, s.lease = adopt(sb, t, lease)
	created := sb.Config()
	s.created = &created
	return nil
}

// adopt makes sb, with its layers' lease, what an engine sandbox holds: a
// task sandbox of t's task (which then owns the lease), or a raw one.
func adopt(sb *sandbox.Sandbox, t *task.Sandbox, lease *store.Lease) (*sandbox.Sandbox, *task.Sandbox, *store.Lease) {
	if t == nil {
		return sb, nil, lease
	}
	return sb, task.Adopt(t.Task, sb, lease), nil
}

// reopenSessions opens sessions as a snapshot recorded them.
func (s *Sandbox) reopenSessions(ctx context.Context, sessions []api.SnapshotSession) error {
	var errs []error
	for _, ss := range sessions {
		err := s.sb.OpenSession(ctx, ss.Name, sandbox.SessionOptions{Env: ss.Env, Dir: ss.Cwd})
		if err != nil && ss.Cwd != "" {
			// The directory may be gone from the snapshot (deleted under
			// the shell): open the session in the sandbox's default.
			err = s.sb.OpenSession(ctx, ss.Name, sandbox.SessionOptions{Env: ss.Env})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reopening session %q: %w", ss.Name, err))
			continue
		}
		s.mu.Lock()
		s.sessions[ss.Name] = true
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}
