package engine

import (
	"context"
	"errors"

	"github.com/minisandbox/msb/internal/api"
)

// errNotYet marks the snapshot methods while they are being written.
var errNotYet = errors.New("snapshots are not implemented yet")

// Snapshot commits what a live sandbox wrote as a layer (named when
// req.Name is set) and records its sessions' cwd and environment.
func (e *Engine) Snapshot(ctx context.Context, sandboxID string, req api.SnapshotRequest) (api.SnapshotInfo, error) {
	return api.SnapshotInfo{}, errNotYet
}

// Snapshots lists the named snapshots, oldest first.
func (e *Engine) Snapshots() ([]api.SnapshotInfo, error) { return nil, errNotYet }

// DeleteSnapshot removes a named snapshot's name (ErrNotFound if absent);
// gc then frees its layer unless a sandbox uses it.
func (e *Engine) DeleteSnapshot(name string) error { return errNotYet }

// Fork starts req.Count new sandboxes from a snapshot of a live sandbox.
func (e *Engine) Fork(ctx context.Context, sandboxID string, req api.ForkRequest) ([]*Sandbox, error) {
	return nil, errNotYet
}

// Rollback resets a live sandbox in place to a snapshot or, without one,
// to its state at creation.
func (e *Engine) Rollback(ctx context.Context, sandboxID string, req api.RollbackRequest) (api.SandboxInfo, error) {
	return api.SandboxInfo{}, errNotYet
}
