package client

import (
	"context"
	"net/url"

	"github.com/minisandbox/msb/internal/api"
)

// Snapshot keeps what a live sandbox wrote, and its sessions' cwd and
// environment, as a snapshot (req.Name empty: an anonymous one).
func (c *Client) Snapshot(ctx context.Context, id string, req api.SnapshotRequest) (api.SnapshotInfo, error) {
	var out api.SnapshotInfo
	return out, c.call(ctx, "POST", sb(id, "/snapshot"), nil, req, &out)
}

// Snapshots lists the daemon's named snapshots, oldest first.
func (c *Client) Snapshots(ctx context.Context) ([]api.SnapshotInfo, error) {
	var out api.SnapshotList
	return out.Snapshots, c.call(ctx, "GET", "/v1/snapshots", nil, nil, &out)
}

// DeleteSnapshot drops a named snapshot.
func (c *Client) DeleteSnapshot(ctx context.Context, name string) error {
	return c.call(ctx, "DELETE", "/v1/snapshots/"+url.PathEscape(name), nil, nil, nil)
}

// Fork starts req.Count new sandboxes (0: one) from a snapshot of a live
// sandbox (req.Snapshot empty: of its state now) and describes them.
func (c *Client) Fork(ctx context.Context, id string, req api.ForkRequest) ([]api.SandboxInfo, error) {
	var out api.SandboxList
	return out.Sandboxes, c.call(ctx, "POST", sb(id, "/fork"), nil, req, &out)
}

// Rollback resets a sandbox in place to a snapshot (req.Snapshot empty:
// to its state at creation).
func (c *Client) Rollback(ctx context.Context, id string, req api.RollbackRequest) (api.SandboxInfo, error) {
	var out api.SandboxInfo
	return out, c.call(ctx, "POST", sb(id, "/rollback"), nil, req, &out)
}

// ForkSnapshot starts req.Count new sandboxes (0: one) from the named
// snapshot, also once the sandbox it was taken of is closed.
func (c *Client) ForkSnapshot(ctx context.Context, name string, req api.ForkRequest) ([]api.SandboxInfo, error) {
	var out api.SandboxList
	return out.Sandboxes, c.call(ctx, "POST", "/v1/snapshots/"+url.PathEscape(name)+"/fork", nil, req, &out)
}
