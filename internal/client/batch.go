package client

import (
	"context"
	"fmt"

	"github.com/minisandbox/msb/internal/api"
)

// CreateSandboxes creates n sandboxes like req (req.Count is set to n),
// all or none, and describes them.
func (c *Client) CreateSandboxes(ctx context.Context, n int, req api.CreateSandboxRequest) ([]api.SandboxInfo, error) {
	if n < 1 {
		return nil, fmt.Errorf("creating %d sandboxes: give at least 1", n)
	}
	req.Count = n
	var out api.SandboxList
	return out.Sandboxes, c.call(ctx, "POST", "/v1/sandboxes", nil, req, &out)
}
