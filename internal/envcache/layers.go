package envcache

import (
	"context"

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
// environment then its repository commit, and which of them this store
// holds, without building or fetching anything. When all are present,
// Prepare builds nothing; a missing one can be pulled by its ref from a
// node whose cache holds it (Cache.Pull on the engine), since the refs are
// the same on every node of the same base and interpreter.
func (c *Cache) Layers(ctx context.Context, inst dataset.Instance, sp spec.Spec) ([]LayerStatus, error) {
	base, err := c.base()
	if err != nil {
		return nil, err
	}
	py, err := c.python(ctx, sp.Python, base)
	if err != nil {
		return nil, err
	}
	key, err := c.envKey(inst, sp, base, py)
	if err != nil {
		return nil, err
	}
	refs := []string{EnvRef(key), RepoRef(inst.Repo, inst.BaseCommit)}
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
