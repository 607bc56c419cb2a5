package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrNetworkFixed: the change asked of a running sandbox's network cannot
// be made without restarting it (a sandbox started without the filtered
// network has no forwarder to add rules to; one started with the host's
// loopback closed cannot open it). The message says which.
var ErrNetworkFixed = errors.New("the sandbox's network cannot change that way while it runs")

// netUpdates serializes policy updates, which are rare: two at once on one
// sandbox would race to load their rulesets.
var netUpdates sync.Mutex

// UpdateNetPolicy replaces the policy of a running filtered sandbox: the
// new rules are resolved, then loaded in its network namespace in one
// nft transaction (the old table deleted and the new one added), so no
// connection is judged by a mix of both. p nil is all but the host's
// loopback, as at start. The forwarder is not restarted: a policy that
// opens the host's loopback to a sandbox started with it closed is
// ErrNetworkFixed.
func (s *Sandbox) UpdateNetPolicy(ctx context.Context, p *NetPolicy) error {
	if s.conf.Network != NetworkFiltered {
		return fmt.Errorf("%w: it was started with network %q, and only a filtered sandbox has rules", ErrNetworkFixed, s.conf.Network)
	}
	if p == nil {
		p = &NetPolicy{}
	}
	if err := p.check(); err != nil {
		return err
	}
	rules, err := p.resolve(ctx, defaultResolver)
	if err != nil {
		return err
	}
	if rules.hostLoopback() && !s.startedWithLoopback(ctx) {
		return fmt.Errorf("%w: the rules allow the host's loopback, which its forwarder was started without", ErrNetworkFixed)
	}
	paths, err := lookForwarder()
	if err != nil {
		return err
	}
	netUpdates.Lock()
	defer netUpdates.Unlock()
	return s.applyRules(ctx, paths["nsenter"], paths["nft"], s.InitPid(), "table inet msb\ndelete table inet msb\n"+rules.ruleset())
}

// startedWithLoopback reports whether the sandbox's forwarder was started
// with the host's loopback open (what its start policy said).
func (s *Sandbox) startedWithLoopback(ctx context.Context) bool {
	if s.conf.NetPolicy == nil {
		return false
	}
	rules, err := s.conf.NetPolicy.resolve(ctx, defaultResolver)
	return err == nil && rules.hostLoopback()
}
