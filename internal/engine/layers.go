package engine

import (
	"context"
	"fmt"

	"github.com/minisandbox/msb/internal/api"
)

// InstanceLayers says which layers a task sandbox of the instance needs and
// which the cache holds, building and fetching nothing.
func (e *Engine) InstanceLayers(ctx context.Context, id string) (api.InstanceLayers, error) {
	t, err := e.task(id)
	if err != nil {
		return api.InstanceLayers{}, err
	}
	sts, err := e.cache.c.Layers(ctx, t.Instance, t.Spec)
	if err != nil {
		return api.InstanceLayers{}, fmt.Errorf("layers of %s: %w", id, err)
	}
	out := api.InstanceLayers{InstanceID: id, Layers: api.List[api.LayerStatus]{}, Present: true}
	for _, st := range sts {
		ls := api.LayerStatus{Ref: st.Ref, Present: st.Present}
		if st.Present {
			ls.Layer = st.Layer.String()
		}
		out.Layers = append(out.Layers, ls)
		out.Present = out.Present && st.Present
	}
	return out, nil
}
