package engine

import (
	"context"

	"github.com/minisandbox/msb/internal/sandbox"
)

// ErrNetworkFixed: a running sandbox's network cannot change that way
// (see sandbox.Sandbox.UpdateNetPolicy).
var ErrNetworkFixed = sandbox.ErrNetworkFixed

// UpdateNetPolicy replaces the network policy of a running filtered
// sandbox (nil: all but the host's loopback); see
// sandbox.Sandbox.UpdateNetPolicy.
func (s *Sandbox) UpdateNetPolicy(ctx context.Context, p *NetPolicy) error {
	defer s.use()()
	return s.sbox().UpdateNetPolicy(ctx, p)
}
