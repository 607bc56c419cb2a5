package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/store"
	"github.com/minisandbox/msb/internal/task"
)

// Rollback resets a live sandbox in place (same id, labels, limits,
// lifetime, host name, binds, network and network policy in force) to
// the named snapshot req.Snapshot or, without one, to its state at
// creation. Where it can (rollbackInPlace: a target of layers; rootless,
// with nsenter), the sandbox itself is reset: its processes but the supervisor
// are killed and it gets a new root over the snapshot's layers (or its
// own at creation) with an empty writable layer, keeping its supervisor,
// namespaces and cgroups (sandbox.Sandbox.Reset). Elsewhere a new
// sandbox is started over those layers and replaces the old one, whose
// processes are killed. Either way the snapshot's sessions (without one,
// the sandbox's sessions, in their defaults) are opened anew. The
// snapshot must be of the sandbox's instance. A call on the sandbox
// still running meanwhile fails as after a close (sandbox.ErrClosed), or
// as its process is killed, or sees the sandbox before or after; calls
// after it reach the sandbox rolled back.
func (e *Engine) Rollback(ctx context.Context, sandboxID string, req api.RollbackRequest) (api.SandboxInfo, error) {
	s, err := e.Sandbox(sandboxID)
	if err != nil {
		return api.SandboxInfo{}, err
	}
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	s.mu.Lock()
	created, conf, ts := s.created, s.sbox().Config(), s.tsk()
	if created == nil && ts == nil {
		created = &conf // a raw sandbox not rolled back yet
	}
	sessions := slices.Sorted(maps.Keys(s.sessions))
	s.mu.Unlock()
	done, err := e.rollbackInPlace(ctx, s, created, conf, req.Snapshot, sessions)
	switch {
	case done && err != nil:
		return api.SandboxInfo{}, fmt.Errorf("rolling back sandbox %s: %w", sandboxID, err)
	case done:
		e.log.Debug("sandbox rolled back in place", "sandbox", sandboxID, "snapshot", req.Snapshot)
		return s.Info(), nil
	case err != nil:
		e.log.Debug("rolling back in place failed: replacing the sandbox", "sandbox", sandboxID, "err", err)
	}
	next, err := e.rollbackSandbox(ctx, s, created, conf, req.Snapshot, sessions)
	if err != nil {
		return api.SandboxInfo{}, fmt.Errorf("rolling back sandbox %s: %w", sandboxID, err)
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		closeParts(next.parts())
		return api.SandboxInfo{}, fmt.Errorf("rolling back sandbox %s: %w", sandboxID, sandbox.ErrClosed)
	}
	oldSB, oldTask, oldLease := s.parts()
	s.setParts(next.parts())
	s.created, s.sessions, s.standby = created, next.sessions, false
	s.mu.Unlock()
	if err := closeParts(oldSB, oldTask, oldLease); err != nil {
		e.log.Debug("closing the rolled back sandbox", "sandbox", sandboxID, "err", err)
	}
	e.log.Debug("sandbox rolled back", "sandbox", sandboxID, "snapshot", req.Snapshot)
	return s.Info(), nil
}

// rollbackInPlace resets s's sandbox to the rollback's target in place
// (sandbox.Sandbox.Reset) where it can (CanReset): the target is layers
// (a named snapshot, or created, the config s was made from) over the
// same host base, whose lease then replaces the one s held; or, for a
// task sandbox opened by CreateSandbox going back to creation, its
// prepared layers with its starting state made again
// (task.Sandbox.ResetToStart). It reports done when the rollback is over,
// with an error of the target (unknown snapshot, another instance's) or
// of the sessions reopened; otherwise the caller replaces the sandbox,
// unchanged (err nil) or left by a reset that failed (err says why).
func (e *Engine) rollbackInPlace(ctx context.Context, s *Sandbox, created *sandbox.Config, conf sandbox.Config, name string, sessions []string) (done bool, err error) {
	sb := s.sbox()
	if sb.CanReset() != nil {
		return false, nil
	}
	if name == "" && created == nil {
		return e.resetToStart(ctx, s, sessions)
	}
	snap, err := e.rollbackTarget(ctx, s, created, name, sessions)
	if err != nil {
		return true, err
	}
	if created != nil {
		conf = *created // as rollbackSandbox starts from it
	}
	if snap.rec.HostBase != conf.HostBase {
		return false, nil
	}
	var top *store.LayerID
	if snap.layer != (store.LayerID{}) {
		top = &snap.layer
	}
	paths, lease, err := e.layerPaths(ctx, snap.rec.Base, top)
	if err != nil {
		return true, err
	}
	owners, err := forkOwners(e.cache.st(), snap, conf)
	if err == nil {
		err = sb.Reset(ctx, sandbox.Deferred{Layers: paths, Owners: owners})
	}
	if err != nil {
		lease.Release()
		return false, err
	}
	if err := s.afterReset(lease, created); err != nil {
		return true, err
	}
	return true, s.reopenSessions(ctx, snap.rec.Sessions)
}

// resetToStart is rollbackInPlace of a task sandbox opened by
// CreateSandbox to its creation: its prepared layers, which its task
// sandbox's lease keeps, and its starting state made again.
func (e *Engine) resetToStart(ctx context.Context, s *Sandbox, sessions []string) (done bool, err error) {
	ts := s.tsk()
	if ts == nil || ts.CanResetToStart() != nil {
		return false, nil
	}
	snap, err := e.rollbackTarget(ctx, s, nil, "", sessions)
	if err != nil {
		return true, err
	}
	if err := ts.ResetToStart(ctx); err != nil {
		return false, err
	}
	if err := s.afterReset(nil, nil); err != nil {
		return true, err
	}
	return true, s.reopenSessions(ctx, snap.rec.Sessions)
}

// afterReset records a reset in place of s's sandbox: lease, the lease of
// its new layers (nil: its task sandbox's keeps them), replaces the one s
// held, created is kept, and the sessions are gone. On a sandbox closed
// meanwhile it releases lease and fails with sandbox.ErrClosed.
func (s *Sandbox) afterReset(lease *store.Lease, created *sandbox.Config) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		if lease != nil {
			lease.Release()
		}
		return sandbox.ErrClosed
	}
	old := s.lease
	s.lease, s.created, s.sessions, s.standby = lease, created, map[string]bool{}, false
	s.mu.Unlock()
	if old != nil {
		old.Release()
	}
	return nil
}

// rollbackSandbox starts what replaces s: over the named snapshot; else
// over created (the layers s was made of); else, for a task sandbox made
// by CreateSandbox (created nil), a new sandbox of its task, opened as
// its first was (a SWE-smith bug committed again). conf is s's config now.
func (e *Engine) rollbackSandbox(ctx context.Context, s *Sandbox, created *sandbox.Config, conf sandbox.Config, name string, sessions []string) (*Sandbox, error) {
	next := &Sandbox{e: e, sessions: map[string]bool{}}
	snap, err := e.rollbackTarget(ctx, s, created, name, sessions)
	if err != nil {
		return nil, err
	}
	switch {
	case name == "" && created == nil:
		ts, err := task.Open(ctx, e.env, s.tsk().Task, task.Options{Limits: s.limits, MaxOutput: conf.MaxOutput, Network: conf.Network, Hostname: s.sbox().Hostname()})
		if err != nil {
			return nil, err
		}
		next.setParts(ts.Sandbox, ts, nil)
	case created != nil:
		conf = *created
		fallthrough
	default:
		var t *task.Task
		if s.tsk() != nil {
			t = s.tsk().Task
		}
		if err := next.startFrom(ctx, s.keep(conf), t, snap); err != nil {
			return nil, err
		}
	}
	if err := next.reopenSessions(ctx, snap.rec.Sessions); err != nil {
		closeParts(next.parts())
		return nil, err
	}
	return next, nil
}

// keep gives c, a config s was created with, what s keeps across a
// rollback beyond it: its host name (by default named after the id of the
// sandbox it started as, which its replacement's id is not) and the
// network policy in force. s.stateMu is held.
func (s *Sandbox) keep(c sandbox.Config) sandbox.Config {
	c.Hostname = s.sbox().Hostname()
	return s.withPolicy(c)
}

// withPolicy gives c, a config of s, the network policy UpdateNetPolicy
// put in force last, if one did: a fork or rollback of s starts with it,
// not with the policy s was created with. s.stateMu is held.
func (s *Sandbox) withPolicy(c sandbox.Config) sandbox.Config {
	if s.policySet {
		c.NetPolicy = s.policy
	}
	return c
}

// rollbackTarget is the state a rollback goes to: the named snapshot, or
// the sandbox's layers at creation (created; nil for a task sandbox to
// open anew) with its sessions reopened in their defaults.
func (e *Engine) rollbackTarget(ctx context.Context, s *Sandbox, created *sandbox.Config, name string, sessions []string) (snapshot, error) {
	if name == "" {
		snap := snapshot{}
		if created != nil {
			base, err := layersOf(e.cache.st(), created.Layers)
			if err != nil {
				return snapshot{}, err
			}
			snap.rec.Base, snap.rec.HostBase = base, created.HostBase
		}
		for _, n := range sessions {
			if n != standbySession {
				snap.rec.Sessions = append(snap.rec.Sessions, api.SnapshotSession{Name: n})
			}
		}
		return snap, nil
	}
	snap, err := e.loadSnapshot(ctx, name)
	if err != nil {
		return snapshot{}, err
	}
	if snap.rec.InstanceID != s.info.InstanceID {
		return snapshot{}, fmt.Errorf("%w: snapshot %q is of instance %q, sandbox %s of %q", ErrBadRequest, name, snap.rec.InstanceID, s.ID(), s.info.InstanceID)
	}
	return snap, nil
}

// closeParts closes what an engine sandbox holds: its task sandbox (which
// releases its layers) or its sandbox, and its layer lease (a raw
// sandbox's, or the one of the layers a rollback in place put under a
// task sandbox).
func closeParts(sb *sandbox.Sandbox, ts *task.Sandbox, lease *store.Lease) error {
	var err error
	if ts != nil {
		err = ts.Close()
	} else {
		err = sb.Close()
	}
	if lease != nil {
		err = errors.Join(err, lease.Release())
	}
	return err
}
