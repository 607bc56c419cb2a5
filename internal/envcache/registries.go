package envcache

import (
	"fmt"
	"net/http"
	"time"

	"github.com/minisandbox/msb/internal/envcache/regproxy"
	"github.com/minisandbox/msb/internal/sandbox"
)

// registryNetwork is the network of a dependency step with the build
// network: the host's, with npm, go, cargo and mvn pointed at a registry
// proxy (package regproxy; the step runs regproxy.SetupScript first,
// dependencyStep) that keeps what they fetch in the download cache, for
// offline rebuilds (offlineBuildEnv, seedScript). Its upstreams are the
// toolchain registries (Options.Toolchains.Registries).
func (c *Cache) registryNetwork() (buildNet, error) {
	reg := c.opts.Toolchains.Registries
	p := &regproxy.Proxy{Dir: c.opts.DownloadCache, NPM: reg.npm(), Go: reg.goProxy(), Cargo: reg.cargo(), Maven: reg.maven(),
		Log: c.log, Client: &http.Client{Timeout: 30 * time.Minute}}
	addr, stop, err := p.Start()
	if err != nil {
		return buildNet{}, err
	}
	return buildNet{network: sandbox.NetworkHost, stop: stop, env: regproxy.Env(addr)}, nil
}

// RegistryProxy starts a registry proxy for a sandbox given the host's
// network (task.Open): there the dependency tools fetch what the layers
// lack through it, as the dependency step did. cargo needs it: a layer
// built through the proxy names crates.io by regproxy.CargoHost, which
// only the proxy answers. env is what the sandbox adds (OnlineEnv first);
// stop ends the proxy.
func (c *Cache) RegistryProxy() (env []string, stop func(), err error) {
	n, err := c.registryNetwork()
	if err != nil {
		return nil, nil, fmt.Errorf("starting the registry proxy: %w", err)
	}
	return n.env, n.stop, nil
}
