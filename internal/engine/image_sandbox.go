package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/envlist"
	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/store"
)

// An image sandbox is a raw sandbox (SandboxRequest.Image) whose root is an
// imported image or a Debian base msb built instead of the host's system
// directories: the image's layers, then the request's Layers, under the
// sandbox's private upper dir, with the image's config as defaults.

// ImageRoot is a root the cache holds made ready for a sandbox: its layer
// trees and those of the layers stacked above it, bottom first, leased
// until Lease is released, over the host's system directories when
// HostBase is set, and its config.
type ImageRoot struct {
	Ref      string // the source the name resolved to
	HostBase bool
	Layers   []string
	// Image is how many of Layers are the root's own, the rest being
	// stacked above it (sandbox.Config.ImageLayers).
	Image  int
	Config rootfs.Config
	Lease  *store.Lease

	st  *store.Store
	ids []store.LayerID // Layers' ids, for the owners of a rootless store (envcache.ImageUser)
}

// ImageRoot resolves a root the cache holds (what rootfs.Resolve takes
// besides the host: a reference, image/<ref>, sha256:<manifest digest>,
// debian/<suite>/<key>, debian/<name>, snapshot/<name>, a layer ref or
// digest) and the store layers to stack above it, then leases them all
// (the lease materializes a compacted one). The CLI (msb run --image)
// and the daemon (SandboxRequest.Image) both come here. A name the cache
// holds nothing under is ErrNotFound wrapping rootfs.ErrNoImage
// (rootfs.ErrNoSnapshot for a snapshot); the host is ErrBadRequest.
func (c *Cache) ImageRoot(ctx context.Context, name string, above ...string) (ImageRoot, error) {
	src, root, err := c.resolveRoot(ctx, name)
	if err != nil {
		return ImageRoot{}, err
	}
	return c.imageRoot(ctx, &resolvedRoot{name: name, src: src, root: root}, above...)
}

// imageRoot is ImageRoot of a root already resolved.
func (c *Cache) imageRoot(ctx context.Context, r *resolvedRoot, above ...string) (ImageRoot, error) {
	st, name, src, root := c.st(), r.name, r.src, r.root
	all := slices.Clone(root.Layers)
	if len(above) > 0 {
		var tops []store.LayerID
		for _, n := range above {
			id, err := c.resolve(n)
			if err != nil {
				return ImageRoot{}, err
			}
			tops = append(tops, id)
		}
		stacked, err := c.stacks(tops)
		if err != nil {
			return ImageRoot{}, err
		}
		for _, id := range stacked { // an environment built on the image has its layers as parents
			if !slices.Contains(all, id) {
				all = append(all, id)
			}
		}
	}
	lease, err := st.Lease(ctx, all...)
	if err != nil {
		return ImageRoot{}, fmt.Errorf("leasing the layers of %s: %w", name, err)
	}
	image := len(root.Layers)
	if root.Image > 0 && root.Image < image { // a snapshot's: its image's own below its layers
		image = root.Image
	}
	out := ImageRoot{Ref: src.String(), HostBase: root.HostBase, Lease: lease, Config: root.Config, Layers: make([]string, len(all)),
		Image: image, st: st, ids: all}
	for i, id := range all { // the lease made every tree there (Lease thaws a compacted one) and keeps it
		out.Layers[i] = st.TreePath(id)
	}
	return out, nil
}

// Configure puts the root under conf: its layers (conf's own layers, if
// any, go above them, and ImageLayers says where the image's own end), its Env before conf's (which overrides it by
// name), its WorkingDir unless conf has one, and its User, with the
// owners a rootless store's trees lack (envcache.ImageOwners) when that user is not
// root (a rootless sandbox then maps the caller's subordinate ids), and
// that user's HOME from the image's /etc/passwd when neither Env sets one
// (rootfs.Account.HomeEnv).
func (ir ImageRoot) Configure(conf *sandbox.Config) error {
	conf.HostBase = ir.HostBase
	conf.Layers = append(slices.Clone(ir.Layers), conf.Layers...)
	conf.ImageLayers = ir.Image
	conf.Env = envlist.Merge(ir.Config.Env, conf.Env)
	if conf.Workdir == "" {
		conf.Workdir = ir.Config.WorkingDir
	}
	if ir.Config.User == "" {
		return nil
	}
	a, err := rootfs.LookupUser(ir.Layers, ir.Config.User)
	if err != nil {
		return fmt.Errorf("%w: image %q: %w", ErrBadRequest, ir.Ref, err)
	}
	conf.User, conf.Env = User{UID: a.UID, GID: a.GID}, a.HomeEnv(conf.Env)
	if conf.Owners, err = envcache.ImageOwners(ir.st, ir.ids, conf.User); err != nil {
		return fmt.Errorf("image %q: %w", ir.Ref, err)
	}
	return nil
}

// ImageUser reads an image's USER (uid, uid:gid, name or name:group) into
// ids, looking names up in the /etc/passwd and /etc/group of the image's
// layer trees (bottom first): rootfs.LookupUser.
func ImageUser(layers []string, u string) (User, error) {
	a, err := rootfs.LookupUser(layers, u)
	if err != nil {
		return User{}, err
	}
	return User{UID: a.UID, GID: a.GID}, nil
}

// applyImage puts req.Image, with req.Layers above it, under conf (see
// ImageRoot.Configure). r is req.Image as CreateSandbox resolved it (nil:
// resolve it here). The caller releases the returned lease with the
// sandbox.
func (e *Engine) applyImage(ctx context.Context, req SandboxRequest, r *resolvedRoot, conf *sandbox.Config) (*store.Lease, error) {
	if req.HostBase {
		return nil, fmt.Errorf("%w: an image is the sandbox's root; it does not go with host_base", ErrBadRequest)
	}
	var ir ImageRoot
	var err error
	if r != nil && r.name == req.Image {
		ir, err = e.cache.imageRoot(ctx, r, req.Layers...)
		if errors.Is(err, store.ErrNotFound) { // gone while admission waited (a gc, a new import under the name): look again
			r = nil
		}
	}
	if r == nil || r.name != req.Image {
		ir, err = e.cache.ImageRoot(ctx, req.Image, req.Layers...)
	}
	if err != nil {
		return nil, err
	}
	conf.Layers = nil
	if err := ir.Configure(conf); err != nil {
		ir.Lease.Release()
		return nil, err
	}
	return ir.Lease, nil
}

// resolveRoot is the root a request's image names. The host is a bad
// request (that is host_base); a name the cache holds nothing under is
// ErrNotFound wrapping rootfs.ErrNoImage.
func (c *Cache) resolveRoot(ctx context.Context, image string) (rootfs.Source, rootfs.Root, error) {
	src := rootfs.Resolve(c.st(), image)
	if _, ok := src.(rootfs.Host); ok {
		return nil, rootfs.Root{}, fmt.Errorf("%w: image %q is the host: ask for host_base", ErrBadRequest, image)
	}
	root, err := src.Root(ctx, c.st())
	if _, layer := src.(rootfs.Layer); layer && (errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrBadRef)) {
		return nil, rootfs.Root{}, fmt.Errorf("%w: image %q: %w (import it with msb cache import-image)", ErrNotFound, image, rootfs.ErrNoImage)
	}
	if err != nil {
		return nil, rootfs.Root{}, fmt.Errorf("image %q: %w", image, err)
	}
	return src, root, nil
}

// resolvedRoot is a root the cache holds, as a name resolved to it.
type resolvedRoot struct {
	name string
	src  rootfs.Source
	root rootfs.Root
}

// lookImage resolves the root a request names (see resolveRoot); none
// named is nil. CreateSandbox resolves it once, before admission (an
// unknown image fails at once), for the pool's key and the sandbox's
// start alike.
func (c *Cache) lookImage(ctx context.Context, image string) (*resolvedRoot, error) {
	if image == "" {
		return nil, nil
	}
	src, root, err := c.resolveRoot(ctx, image)
	if err != nil {
		return nil, err
	}
	return &resolvedRoot{name: image, src: src, root: root}, nil
}
