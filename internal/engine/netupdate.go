package engine

import (
	"context"
	"slices"

	"github.com/minisandbox/msb/internal/sandbox"
)

// ErrNetworkFixed: a running sandbox's network cannot change that way
// (see sandbox.Sandbox.UpdateNetPolicy).
var ErrNetworkFixed = sandbox.ErrNetworkFixed

// UpdateNetPolicy replaces the network policy of a running filtered
// sandbox (nil: all but the host's loopback); see
// sandbox.Sandbox.UpdateNetPolicy. A rollback keeps the policy.
func (s *Sandbox) UpdateNetPolicy(ctx context.Context, p *NetPolicy) error {
	defer s.use()()
	s.stateMu.Lock() // a rollback meanwhile would start from the old policy
	defer s.stateMu.Unlock()
	if err := s.sbox().UpdateNetPolicy(ctx, p); err != nil {
		return err
	}
	if p != nil {
		p = &NetPolicy{Allow: slices.Clone(p.Allow), Deny: slices.Clone(p.Deny)}
	}
	s.policy, s.policySet = p, true
	return nil
}
