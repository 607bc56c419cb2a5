package envcache

import (
	"context"
	"time"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/minisandbox/msb/internal/store"
)

// LayerStatus is one layer a task of an instance is made of: the ref that
// names it, the layer the ref points at in this store (zero when the ref is
// absent) and whether the store holds that layer.
type LayerStatus struct {
	Ref     string
	Layer   store.LayerID
	Present bool
}

// Layers lists the layers a task sandbox of inst is made of, its
// environment, its repository commit and its install layer (when the spec
// has install steps and the store holds the repository layer, whose id is
// part of the install key), and which of them this store holds, without building
// anything (the repository's mirror is fetched when the keys need it).
// When all are present, Prepare builds nothing; a missing one can be pulled
// by its ref from a node whose cache holds it (Cache.Pull on the engine),
// since the refs are the same on every node of the same base and
// interpreter. An image instance's one layer is its image, named as its
// row names it.
func (c *Cache) Layers(ctx context.Context, inst dataset.Instance, sp spec.Spec) ([]LayerStatus, error) {
	if inst.Image != "" {
		return c.imageLayers(ctx, inst)
	}
	r := &run{inst: inst.InstanceID, timings: map[string]time.Duration{}}
	base, err := c.instanceBase(ctx, r, inst, sp, false)
	if err != nil {
		return nil, err
	}
	defer base.release()
	env, _, err := c.envJob(ctx, r, inst, sp, base)
	if err != nil {
		return nil, err
	}
	refs := []string{EnvRef(env.key), RepoRef(inst.Repo, inst.BaseCommit)}
	// The install key has the repository layer in it: without that layer
	// here, the install layer is not listed (it is absent too).
	repoID, repoErr := c.store.Ref(refs[1])
	if installScript(sp) != "" && repoErr == nil {
		// the install key has setuptools-scm's version: recorded, or from the mirror
		scmEnv, err := c.scmEnvFor(ctx, r, inst, sp)
		if err != nil {
			return nil, err
		}
		key, _ := installKey(inst, sp, env.key, repoID, scmEnv)
		refs = append(refs, InstallRef(key))
	}
	out := make([]LayerStatus, 0, len(refs))
	for _, ref := range refs {
		st := LayerStatus{Ref: ref}
		if id, err := c.store.Ref(ref); err == nil {
			st.Layer, st.Present = id, c.store.Has(id)
		}
		out = append(out, st)
	}
	return out, nil
}
