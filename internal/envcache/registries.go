package envcache

import (
	"net/http"
	"time"

	"github.com/minisandbox/msb/internal/envcache/regproxy"
	"github.com/minisandbox/msb/internal/sandbox"
)

// registryNetwork is the network of a dependency step with the build
// network: the host's, with npm and go pointed at a registry proxy
// (package regproxy) that keeps what they fetch in the download cache,
// for offline rebuilds (offlineBuildEnv, seedScript). Its upstreams are
// the toolchain registries (Options.Toolchains.Registries).
func (c *Cache) registryNetwork() (buildNet, error) {
	reg := c.opts.Toolchains.Registries
	p := &regproxy.Proxy{Dir: c.opts.DownloadCache, NPM: reg.npm(), Go: reg.goProxy(), Log: c.log,
		Client: &http.Client{Timeout: 30 * time.Minute}}
	addr, stop, err := p.Start()
	if err != nil {
		return buildNet{}, err
	}
	return buildNet{network: sandbox.NetworkHost, stop: stop, env: regproxy.Env(addr)}, nil
}
