package engine

import "github.com/minisandbox/msb/internal/sandbox"

// BuildNetworkMode is the network of sandboxes that build environments
// for a front end (E2B's template builds): the host's when the cache's
// BuildNetwork is on, none otherwise, as for the cache's own builds.
func (e *Engine) BuildNetworkMode() string {
	if e.cfg.Cache.BuildNetwork {
		return sandbox.NetworkHost
	}
	return sandbox.NetworkNone
}
