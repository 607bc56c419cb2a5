package envcache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/minisandbox/msb/internal/store"
)

// KindPackages is the kind of a Debian packages layer: a spec that names a
// base has its system_packages installed by apt-get in a build sandbox
// over that base, and the layer is the base its environment is built on.
const KindPackages = "debpkgs"

// ErrBadBase: a spec names a base the cache does not hold, or the host.
var ErrBadBase = errors.New("bad spec base")

// errHostUnder says why a root of layers over the host's directories (a
// snapshot of a sandbox on the host base) cannot be a base: builds run on
// the host or on layers, not both.
var errHostUnder = errors.New("its layers go over the host's directories (a snapshot of a host-base sandbox): snapshot a sandbox on a layer or image base")

// PackagesRef is the ref of a Debian packages layer.
func PackagesRef(key string) string { return "debpkgs/" + key }

// packagesKeyInput is what a packages layer's key hashes.
type packagesKeyInput struct {
	Format   int      `json:"format"`
	Base     string   `json:"base"`
	Packages []string `json:"packages"`
}

// instanceBase is the root an instance's environment is built on. Without
// a spec base it is the cache's, which must have the spec's Debian packages
// already (checked when build is set); with one (sp.Base) it is that base
// with the packages installed in a layer over it, built once (when build is
// false a missing layer is not built: the base then has the layer's key but
// not its files). Its layers are leased (see base): release it when done.
func (c *Cache) instanceBase(ctx context.Context, r *run, inst dataset.Instance, sp spec.Spec, build bool) (baseInfo, error) {
	if sp.Base == "" {
		base, err := c.base(ctx)
		if err != nil || !build {
			return base, err
		}
		if err := c.checkSystemPackages(inst, sp, base); err != nil {
			base.release()
			return baseInfo{}, err
		}
		return base, nil
	}
	base, err := c.resolveBase(ctx, sp.Base)
	if err != nil {
		return base, err
	}
	if base.host {
		return base, fmt.Errorf("spec base %q: %w: a spec base is a Debian base or an image, not the host", sp.Base, ErrBadBase)
	}
	pkgs := slices.Clone(sp.SystemPackages)
	slices.Sort(pkgs)
	pkgs = slices.Compact(pkgs)
	if len(pkgs) == 0 {
		return base, nil
	}
	key := digestJSON(packagesKeyInput{Format: FormatVersion, Base: base.keyStr, Packages: pkgs})
	out := baseInfo{keyStr: KindPackages + ":" + key, layer: base.layer, stack: base.stack, env: base.env, lease: base.lease}
	if !build {
		if id, err := c.store.Ref(PackagesRef(key)); err == nil && c.store.Has(id) {
			return c.packagesOver(ctx, out, id)
		}
		return out, nil
	}
	script, err := aptScript(pkgs)
	if err != nil {
		out.release()
		return baseInfo{}, &BuildError{Kind: KindPackages, EnvKey: inst.EnvironmentKey(), Reason: err.Error()}
	}
	job := buildJob{kind: KindPackages, key: key, envKey: inst.EnvironmentKey(), script: script, workdir: "/",
		header: fmt.Sprintf("msb Debian packages build %s over %s: %s", key, sp.Base, strings.Join(pkgs, " ")),
		stack:  base.stack, base: base, hostNetwork: true}
	id, err := c.layerOnce(ctx, r, job, PackagesRef(key), &c.envBuilds, []store.LayerID{base.layer})
	if err != nil {
		out.release()
		return baseInfo{}, err
	}
	return c.packagesOver(ctx, out, id)
}

// packagesOver returns base with its packages layer id on top, leased in
// place of the layers below it (a lease holds a layer's parents too).
func (c *Cache) packagesOver(ctx context.Context, base baseInfo, id store.LayerID) (baseInfo, error) {
	lease, err := c.store.Lease(ctx, id)
	base.release()
	if err != nil {
		return baseInfo{}, fmt.Errorf("packages layer %s: %w", id.Short(), err)
	}
	stack, err := c.store.Stack(id)
	if err != nil {
		lease.Release()
		return baseInfo{}, err
	}
	base.layer, base.stack, base.lease = id, stack, lease
	return base, nil
}

// resolveBase is base() for a name other than the cache's.
func (c *Cache) resolveBase(ctx context.Context, name string) (baseInfo, error) {
	src := rootfs.Resolve(c.store, name)
	if _, ok := src.(rootfs.Host); ok {
		return baseInfo{host: true}, nil
	}
	root, err := src.Root(ctx, c.store)
	if err != nil {
		return baseInfo{}, fmt.Errorf("spec base %q: %w: %w (build one with msb cache base build)", name, ErrBadBase, err)
	}
	if root.HostBase {
		return baseInfo{}, fmt.Errorf("spec base %q: %w: %w", name, ErrBadBase, errHostUnder)
	}
	return c.leaseRoot(ctx, fmt.Sprintf("spec base %q", name), root)
}

// aptScript installs pkgs with apt-get and leaves no package lists or
// downloaded .debs in the layer. apt runs as root: a rootless sandbox maps
// no _apt user to drop to.
func aptScript(pkgs []string) (string, error) {
	for _, p := range pkgs {
		if p == "" || strings.HasPrefix(p, "-") || strings.ContainsAny(p, " \t\n'\"\\$`;|&<>()*?") {
			return "", fmt.Errorf("system package name %q", p)
		}
	}
	return `set -eu
export DEBIAN_FRONTEND=noninteractive
command -v apt-get >/dev/null || { echo "the base has no apt-get (build it with --variant minbase)"; exit 100; }
apt="apt-get -q -o APT::Sandbox::User=root -o Dpkg::Use-Pty=0"
$apt update
$apt install -y --no-install-recommends ` + strings.Join(pkgs, " ") + `
$apt clean
rm -rf /var/lib/apt/lists/* /var/log/apt /var/log/dpkg.log /var/cache/debconf/*-old /var/lib/dpkg/*-old
`, nil
}
