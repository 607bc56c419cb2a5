package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/store"
)

// An image sandbox is a raw sandbox (SandboxRequest.Image) whose root is an
// imported image or a Debian base msb built instead of the host's system
// directories: the image's layers, then the request's Layers, under the
// sandbox's private upper dir, with the image's config as defaults.

// imageRoot is what a request's image puts under a sandbox: its layer
// trees (then the request's layers' stacks), bottom first, leased, and its
// config.
type imageRoot struct {
	// hostBase: the root lies over the host's system directories.
	hostBase bool
	paths    []string
	lease    *store.Lease
	config   rootfs.Config
}

// imageRoot resolves a root the cache holds (what rootfs.Resolve takes
// besides the host: a reference, image/<ref>, sha256:<manifest digest>,
// debian/<suite>/<key>, debian/<name>, a layer ref or digest) and the
// layers to stack above it, then leases and materializes them all.
func (c *Cache) imageRoot(ctx context.Context, image string, layers []string) (imageRoot, error) {
	st := c.st()
	root, err := c.resolveRoot(ctx, image)
	if err != nil {
		return imageRoot{}, err
	}
	all := slices.Clone(root.Layers)
	if len(layers) > 0 {
		var tops []store.LayerID
		for _, n := range layers {
			id, err := c.resolve(n)
			if err != nil {
				return imageRoot{}, err
			}
			tops = append(tops, id)
		}
		above, err := c.stacks(tops)
		if err != nil {
			return imageRoot{}, err
		}
		for _, id := range above { // an environment built on the image has its layers as parents
			if !slices.Contains(all, id) {
				all = append(all, id)
			}
		}
	}
	lease, err := st.Lease(ctx, all...)
	if err != nil {
		return imageRoot{}, fmt.Errorf("leasing the layers of %s: %w", image, err)
	}
	out := imageRoot{hostBase: root.HostBase, lease: lease, config: root.Config, paths: make([]string, len(all))}
	for i, id := range all {
		if out.paths[i], err = st.Materialize(ctx, id); err != nil {
			lease.Release()
			return imageRoot{}, err
		}
	}
	return out, nil
}

// applyImage puts req.Image under conf: its layers replace the host base
// (unless the root itself lies over it),
// its Env comes before the request's (which overrides it by name), its
// WorkingDir is the default workdir and, in root mode, its User the user
// commands run as (a rootless sandbox has only root: there the image's
// user is not applied and commands run as root). The caller releases the
// returned lease with the sandbox.
func (e *Engine) applyImage(ctx context.Context, req SandboxRequest, conf *sandbox.Config) (*store.Lease, error) {
	if req.HostBase {
		return nil, fmt.Errorf("%w: an image is the sandbox's root; it does not go with host_base", ErrBadRequest)
	}
	ir, err := e.cache.imageRoot(ctx, req.Image, req.Layers)
	if err != nil {
		return nil, err
	}
	conf.HostBase, conf.Layers = ir.hostBase, ir.paths
	conf.Env = MergeEnv(ir.config.Env, req.Env)
	if conf.Workdir == "" {
		conf.Workdir = ir.config.WorkingDir
	}
	if u := ir.config.User; u != "" && !e.rt.Rootless() {
		if conf.User, err = ImageUser(ir.paths, u); err != nil {
			ir.lease.Release()
			return nil, fmt.Errorf("%w: image %q: %w", ErrBadRequest, req.Image, err)
		}
	} else if u != "" {
		e.log.Debug("the image's user is not applied in a rootless sandbox", "image", req.Image, "user", u)
	}
	return ir.lease, nil
}

// MergeEnv is base with over's variables replacing or added after its
// own, by name.
func MergeEnv(base, over []string) []string {
	out := make([]string, 0, len(base)+len(over))
	idx := map[string]int{}
	for _, kv := range append(append([]string(nil), base...), over...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// ImageUser reads an image's USER (uid, uid:gid, name or name:group) into
// ids, looking names up in the /etc/passwd and /etc/group of the image's
// layer trees (bottom first).
func ImageUser(layers []string, u string) (User, error) {
	user, group, hasGroup := strings.Cut(u, ":")
	uid, gid := -1, -1
	if n, err := strconv.Atoi(user); err == nil {
		uid = n
	} else if uid, gid, err = lookupID(layers, "etc/passwd", user); err != nil {
		return User{}, err
	}
	if gid < 0 {
		gid = 0
		if _, g, err := lookupID(layers, "etc/passwd", user); err == nil {
			gid = g
		}
	}
	if hasGroup {
		if n, err := strconv.Atoi(group); err == nil {
			gid = n
		} else if gid, _, err = lookupID(layers, "etc/group", group); err != nil {
			return User{}, err
		}
	}
	return User{UID: uid, GID: gid}, nil
}

// lookupID finds name (or a numeric uid) in a passwd or group file of the
// topmost layer holding it: its third and fourth fields (the id, and the
// primary gid for passwd).
func lookupID(layers []string, file, name string) (int, int, error) {
	for i := len(layers) - 1; i >= 0; i-- {
		b, err := os.ReadFile(filepath.Join(layers[i], file))
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			fields := strings.Split(line, ":")
			if len(fields) < 3 || fields[0] != name && fields[2] != name {
				continue
			}
			id, err := strconv.Atoi(fields[2])
			if err != nil {
				break
			}
			gid := -1
			if len(fields) > 3 {
				if g, err := strconv.Atoi(fields[3]); err == nil {
					gid = g
				}
			}
			return id, gid, nil
		}
		break
	}
	return 0, 0, fmt.Errorf("%w: user or group %q is not in the image's /%s", rootfs.ErrImage, name, file)
}

// resolveRoot is the root a request's image names. The host is a bad
// request (that is host_base); a name the cache holds nothing under is
// ErrNotFound wrapping rootfs.ErrNoImage.
func (c *Cache) resolveRoot(ctx context.Context, image string) (rootfs.Root, error) {
	src := rootfs.Resolve(c.st(), image)
	if _, ok := src.(rootfs.Host); ok {
		return rootfs.Root{}, fmt.Errorf("%w: image %q is the host: ask for host_base", ErrBadRequest, image)
	}
	root, err := src.Root(ctx, c.st())
	if _, layer := src.(rootfs.Layer); layer && (errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrBadRef)) {
		return rootfs.Root{}, fmt.Errorf("%w: image %q: %w (import it with msb cache import-image)", ErrNotFound, image, rootfs.ErrNoImage)
	}
	if err != nil {
		return rootfs.Root{}, fmt.Errorf("image %q: %w", image, err)
	}
	return root, nil
}

// hasImage checks that the cache holds the root a request names (none
// named: nothing to check), so that an unknown image fails before
// admission.
func (c *Cache) hasImage(ctx context.Context, image string) error {
	if image == "" {
		return nil
	}
	_, err := c.resolveRoot(ctx, image)
	return err
}
