package envcache

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/store"
)

// ErrNoImage: an image instance's image (dataset.Instance.Image) is not in
// the cache. The message names the image and the import command.
var ErrNoImage = errors.New("the instance's image is not in the cache")

// ErrImageNoRepo: an image instance's image has no git repository where
// the instance's repository may be (repoDirs).
var ErrImageNoRepo = errors.New("the image has no git repository where the task looks for it")

// prepareImage is Prepare for an image instance: the task's root is the
// image's layers with the image's Env, its repository is where the image
// keeps it (repoDir, the spec's, else repoDirs; ErrImageNoRepo when none
// holds one), used as it is, and its commands run as the image's User
// (rootless: through the caller's subordinate ids, with the owners the
// rootless store's trees lack in Owners). Nothing is built, so the
// spec's Python, install steps and system packages are not used; its eval
// script is.
func (c *Cache) prepareImage(ctx context.Context, inst dataset.Instance, repoDir string) (*Prepared, error) {
	root, err := c.imageRoot(ctx, inst)
	if err != nil {
		return nil, err
	}
	lease, err := c.store.Lease(ctx, root.Layers...)
	if err != nil {
		return nil, fmt.Errorf("leasing the layers of image %s: %w", inst.Image, err)
	}
	p := &Prepared{Env: root.Config.Env, Lease: lease, EnvKey: root.Top().Hex(),
		Timings: map[string]time.Duration{}, Reused: true}
	if err := c.configureImage(ctx, p, inst, root, repoDir); err != nil {
		lease.Release()
		return nil, err
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

// configureImage materializes the image's layers into p and sets p's
// repository directory (repoDir, the spec's, or where repoDirs finds
// one) and user from the image, with that user's HOME when the image's
// Env has none (rootfs.Account.HomeEnv).
func (c *Cache) configureImage(ctx context.Context, p *Prepared, inst dataset.Instance, root rootfs.Root, repoDir string) error {
	for _, id := range root.Layers {
		tree, err := c.store.Materialize(ctx, id)
		if err != nil {
			return fmt.Errorf("image %s: %w", inst.Image, err)
		}
		p.Layers = append(p.Layers, tree)
	}
	dirs := repoDirs(inst, repoDir, root.Config.WorkingDir)
	for _, dir := range dirs {
		ok, err := rootfs.IsGitWorkTree(p.Layers, dir)
		if err != nil {
			return fmt.Errorf("image %s: %w", inst.Image, err)
		}
		if ok {
			p.Workdir = dir
			break
		}
	}
	if p.Workdir == "" {
		return fmt.Errorf("image %s: %w (looked in %s)", inst.Image, ErrImageNoRepo, strings.Join(dirs, ", "))
	}
	u := root.Config.User
	if u == "" {
		return nil
	}
	a, err := rootfs.LookupUser(p.Layers, u)
	if err != nil {
		return fmt.Errorf("image %s: %w", inst.Image, err)
	}
	had := len(p.Env)
	p.User, p.Env = sandbox.User{UID: a.UID, GID: a.GID}, a.HomeEnv(p.Env)
	if len(p.Env) > had {
		p.UserHome = p.Env[had]
	}
	if p.Owners, err = ImageOwners(c.store, root.Layers, p.User); err != nil {
		return fmt.Errorf("image %s: %w", inst.Image, err)
	}
	return nil
}

// ImageOwners are the owners a sandbox running an image's layers as user
// gives back: none where user is root or st keeps owners (root mode);
// where st is rootless (it materializes every file as its caller), the
// layers' paths not owned by root (rootfs.Owners).
func ImageOwners(st *store.Store, layers []store.LayerID, user sandbox.User) ([]sandbox.Owner, error) {
	if user == (sandbox.User{}) || !st.Rootless() {
		return nil, nil
	}
	owners, err := rootfs.Owners(st, layers)
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.Owner, len(owners))
	for i, o := range owners {
		out[i] = sandbox.Owner(o)
	}
	return out, nil
}

// repoDirs are where an image instance's repository may be, in the order
// they are tried: the spec's repo_dir (explicit) alone when it names one;
// else for a Multi-SWE-bench row where the benchmark's images keep it
// (/home/<repository name>), then the image's WorkingDir, then Testbed
// (SWE-bench's images, SWE-Gym's, SWE-smith's, R2E-Gym's).
func repoDirs(inst dataset.Instance, explicit, workingDir string) []string {
	if explicit != "" {
		return []string{explicit}
	}
	var dirs []string
	if m := inst.MultiSWE; m != nil && m.Name != "" && !strings.ContainsAny(m.Name, "/\x00") && m.Name != "." && m.Name != ".." {
		dirs = append(dirs, "/home/"+m.Name)
	}
	if wd := path.Clean("/" + workingDir); workingDir != "" && wd != "/" && !slices.Contains(dirs, wd) {
		dirs = append(dirs, wd)
	}
	if !slices.Contains(dirs, Testbed) {
		dirs = append(dirs, Testbed)
	}
	return dirs
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
