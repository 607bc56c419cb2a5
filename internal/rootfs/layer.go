package rootfs

import (
	"context"
	"fmt"
	"strings"

	"github.com/minisandbox/msb/internal/store"
)

// Layer is a store layer named by its digest or a ref (e.g. base/rootfs,
// which msb cache import-rootfs makes): the layer and its parents' stack
// are the root, with no defaults.
type Layer struct {
	// Name is a layer digest (sha256:...) or a ref.
	Name string
}

// Root resolves the layer and its stack.
func (l Layer) Root(_ context.Context, st *store.Store) (Root, error) {
	id, err := store.ParseLayerID(l.Name)
	if err != nil {
		if id, err = st.Ref(l.Name); err != nil {
			return Root{}, fmt.Errorf("root %q: not a layer digest, and the ref: %w", l.Name, err)
		}
	}
	if !st.Has(id) {
		return Root{}, fmt.Errorf("root layer %s: %w", id.Short(), store.ErrNotFound)
	}
	stack, err := st.Stack(id)
	if err != nil {
		return Root{}, fmt.Errorf("root %q: %w", l.Name, err)
	}
	return Root{Layers: bottomFirst(stack)}, nil
}

func (l Layer) String() string { return l.Name }

// bottomFirst reverses a store.Stack (topmost first).
func bottomFirst(stack []store.LayerID) []store.LayerID {
	out := make([]store.LayerID, 0, len(stack))
	for i := len(stack) - 1; i >= 0; i-- {
		out = append(out, stack[i])
	}
	return out
}

// Resolve names the source a user's string means: "" or "host" is the
// host, an image reference that the store holds (image/..., a
// sha256:<manifest digest>, or a reference such as debian:bookworm) is that
// image, a Debian base it holds (debian/<suite>/<key>, debian/<name>) that
// base, snapshot/<name> that snapshot, and anything else is a layer
// digest or ref.
func Resolve(st *store.Store, name string) Source {
	if name == "" || name == "host" {
		return Host{}
	}
	if snap, ok := strings.CutPrefix(name, SnapshotRefPrefix); ok {
		return Snapshot{Name: snap}
	}
	if ref, ok := imageRef(st, name); ok {
		if isDebianName(name) {
			return Debian{Name: ref}
		}
		return Image{Ref: ref}
	}
	return Layer{Name: name}
}
