package rootfs

import (
	"context"
	"fmt"
	"slices"

	"github.com/minisandbox/msb/internal/store"
)

// Image is an imported image, named by its ref in the store (see ImageRef).
type Image struct {
	Ref string
}

// ImageRef returns the ref of an image the store holds, named as a user
// would: image/<reference>, sha256:<manifest digest> or a reference such as
// debian:bookworm. The error wraps ErrNoImage.
func ImageRef(st *store.Store, s string) (string, error) {
	if ref, ok := imageRef(st, s); ok {
		return ref, nil
	}
	return "", fmt.Errorf("%w: %s (import it with msb cache import-image)", ErrNoImage, s)
}

// Root returns the image's layers, bottom first, and its config.
func (i Image) Root(ctx context.Context, st *store.Store) (Root, error) {
	rec, err := ReadRecord(ctx, st, i.Ref)
	if err != nil {
		return Root{}, err
	}
	stack, err := st.Stack(rec.Layers[len(rec.Layers)-1])
	if err != nil {
		return Root{}, fmt.Errorf("image %s: %w", i.Ref, err)
	}
	layers := bottomFirst(stack)
	if !slices.Equal(layers, rec.Layers) {
		return Root{}, fmt.Errorf("image %s: %w: its layers' parents do not match its record", i.Ref, store.ErrBadManifest)
	}
	for _, id := range layers {
		if !st.Has(id) {
			return Root{}, fmt.Errorf("image %s: layer %s: %w", i.Ref, id.Short(), store.ErrNotFound)
		}
	}
	return Root{Layers: layers, Config: rec.Config}, nil
}

func (i Image) String() string { return i.Ref }
