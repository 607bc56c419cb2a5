package envcache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/store"
)

// ErrNoImage: an image instance's image (dataset.Instance.Image) is not in
// the cache. The message names the image and the import command.
var ErrNoImage = errors.New("the instance's image is not in the cache")

// ErrImageNoRepo: an image instance's image has no git repository at
// /testbed, where task and evaluation scripts work.
var ErrImageNoRepo = errors.New("the image has no git repository at " + Testbed)

// prepareImage is Prepare for an image instance: the task's root is the
// image's layers with the image's Env, and its repository is the image's
// /testbed as the image has it (ErrImageNoRepo when it has none). Nothing is built, so the spec's Python,
// install steps and system packages are not used; its eval script is.
func (c *Cache) prepareImage(ctx context.Context, inst dataset.Instance) (*Prepared, error) {
	root, err := c.imageRoot(ctx, inst)
	if err != nil {
		return nil, err
	}
	lease, err := c.store.Lease(ctx, root.Layers...)
	if err != nil {
		return nil, fmt.Errorf("leasing the layers of image %s: %w", inst.Image, err)
	}
	p := &Prepared{Env: root.Config.Env, Workdir: Testbed, Lease: lease, EnvKey: root.Top().Hex(),
		Timings: map[string]time.Duration{}, Reused: true}
	for _, id := range root.Layers {
		tree, err := c.store.Materialize(ctx, id)
		if err != nil {
			lease.Release()
			return nil, fmt.Errorf("image %s: %w", inst.Image, err)
		}
		p.Layers = append(p.Layers, tree)
	}
	if _, ok := c.baseFile(baseInfo{stack: reverse(root.Layers)}, "testbed/.git"); !ok {
		lease.Release()
		return nil, fmt.Errorf("image %s: %w", inst.Image, ErrImageNoRepo)
	}
	if c.opts.CopyMode {
		t := time.Now()
		dir, err := c.assemble(ctx, root.Layers)
		p.Timings["copy"] = time.Since(t)
		if err != nil {
			lease.Release()
			return nil, err
		}
		p.Layers, p.taskDir = []string{dir}, dir
	}
	return p, nil
}

// imageRoot resolves an instance's image among the roots the cache holds:
// an imported image (by reference or digest), a Debian base or a
// snapshot; a name that is none of them is ErrNoImage.
func (c *Cache) imageRoot(ctx context.Context, inst dataset.Instance) (rootfs.Root, error) {
	missing := fmt.Errorf("%w: %s (import it first: msb cache import-image --name %s SOURCE, SOURCE being docker://%s or a docker-archive: or oci: file)",
		ErrNoImage, inst.Image, inst.Image, inst.Image)
	src := rootfs.Resolve(c.store, inst.Image)
	switch src.(type) {
	case rootfs.Host, rootfs.Layer:
		return rootfs.Root{}, missing
	}
	root, err := src.Root(ctx, c.store)
	if errors.Is(err, rootfs.ErrNoImage) || errors.Is(err, rootfs.ErrNoSnapshot) || errors.Is(err, store.ErrNotFound) {
		return rootfs.Root{}, fmt.Errorf("%w: %w", missing, err)
	}
	if err != nil {
		return rootfs.Root{}, fmt.Errorf("image %s: %w", inst.Image, err)
	}
	if root.HostBase {
		return rootfs.Root{}, fmt.Errorf("image %s: %w: %w", inst.Image, ErrBadBase, errHostUnder)
	}
	return root, nil
}

// imageLayers is Layers for an image instance: its image, under the name
// the row gives, present when the cache holds it.
func (c *Cache) imageLayers(ctx context.Context, inst dataset.Instance) ([]LayerStatus, error) {
	st := LayerStatus{Ref: inst.Image}
	root, err := c.imageRoot(ctx, inst)
	switch {
	case errors.Is(err, ErrNoImage):
	case err != nil:
		return nil, err
	default:
		st.Layer, st.Present = root.Top(), true
	}
	return []LayerStatus{st}, nil
}
