package engine

import (
	"context"
	"log/slog"

	"github.com/minisandbox/msb/internal/rootfs"
)

// DebianBase is one Debian base in the cache: its inputs, key, refs and
// sizes.
type DebianBase struct {
	Ref     string            `json:"ref"`
	Key     string            `json:"key"`
	Refs    []string          `json:"refs"`
	Spec    rootfs.DebianSpec `json:"spec"`
	Layer   string            `json:"layer"`
	Hit     bool              `json:"hit,omitempty"`
	Seconds float64           `json:"build_seconds"`
	// FileBytes sums its files' sizes; DiskBytes is what they take on disk;
	// UniqueBytes the part no other layer shares.
	FileBytes   int64 `json:"file_bytes"`
	DiskBytes   int64 `json:"disk_bytes"`
	UniqueBytes int64 `json:"unique_bytes"`
}

// BuildDebianBase builds a Debian base (rootfs.BuildDebian) into the
// cache, or finds it there.
func (c *Cache) BuildDebianBase(ctx context.Context, spec rootfs.DebianSpec, name string, log *slog.Logger) (DebianBase, error) {
	b, err := rootfs.BuildDebian(ctx, c.st(), spec, rootfs.DebianBuildOptions{Name: name, TempDir: c.Dir(), Log: log})
	if err != nil {
		return DebianBase{}, err
	}
	out := DebianBase{Ref: b.Ref, Key: b.Record.Key, Refs: b.Refs, Spec: b.Record.Debian,
		Layer: b.Record.Layers[0].String(), Hit: b.Hit, Seconds: b.Record.BuildSeconds}
	return out, c.sizeBases(ctx, []*DebianBase{&out})
}

// DebianBases lists the Debian bases in the cache.
func (c *Cache) DebianBases(ctx context.Context) ([]DebianBase, error) {
	infos, err := rootfs.DebianBases(ctx, c.st())
	if err != nil {
		return nil, err
	}
	out := make([]DebianBase, 0, len(infos))
	for _, in := range infos {
		out = append(out, DebianBase{Ref: in.Refs[0], Key: in.Record.Key, Refs: in.Refs, Spec: in.Record.Debian,
			Layer: in.Layer.String(), Seconds: in.Record.BuildSeconds})
	}
	ptrs := make([]*DebianBase, len(out))
	for i := range out {
		ptrs[i] = &out[i]
	}
	return out, c.sizeBases(ctx, ptrs)
}

// sizeBases fills the bases' byte counts from the store's usage.
func (c *Cache) sizeBases(ctx context.Context, bases []*DebianBase) error {
	u, err := c.st().Usage(ctx)
	if err != nil {
		return err
	}
	for _, l := range u.Layers {
		for _, b := range bases {
			if l.ID.String() == b.Layer {
				b.FileBytes, b.DiskBytes, b.UniqueBytes = l.LogicalBytes, l.DiskBytes, l.UniqueBytes
			}
		}
	}
	return nil
}
