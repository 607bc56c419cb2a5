package engine

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/store"
)

// ImageOptions tune ImportImage.
type ImageOptions struct {
	// Username and Password authenticate to a registry.
	Username, Password string
	// Insecure allows plain HTTP to a loopback registry.
	Insecure bool
	// Names are references to record the image under, besides the ones its
	// source gives.
	Names []string
	Log   *slog.Logger
	// Progress is told of each layer stored.
	Progress func(rootfs.LayerProgress)
}

// ImageImport says what ImportImage stored.
type ImageImport struct {
	Source   string   `json:"source"`
	Digest   string   `json:"digest"`
	Platform string   `json:"platform,omitempty"`
	Refs     []string `json:"refs"`
	// Layers are the image's store layers, bottom first; Record the layer
	// holding its config.
	Layers []string      `json:"layers"`
	Record string        `json:"record"`
	Config rootfs.Config `json:"config"`
}

// ImportImage imports an image from a source (see rootfs.Open). Errors
// about the image wrap rootfs.ErrImage.
func (c *Cache) ImportImage(ctx context.Context, source string, opts ImageOptions) (ImageImport, error) {
	o, err := rootfs.Open(ctx, source, rootfs.OpenOptions{Username: opts.Username, Password: opts.Password,
		Insecure: opts.Insecure, TempDir: c.Dir()})
	if err != nil {
		return ImageImport{}, err
	}
	defer o.Close()
	imp, err := rootfs.Import(ctx, c.st(), o.Image, rootfs.ImportOptions{Names: append(o.Names, opts.Names...), Log: opts.Log, Progress: opts.Progress})
	if err != nil {
		return ImageImport{}, fmt.Errorf("importing %s: %w", source, err)
	}
	out := ImageImport{Source: source, Digest: imp.Record.Digest, Platform: imp.Record.Platform, Refs: imp.Refs,
		Layers: ids(imp.Record.Layers), Record: imp.RecordLayer.String(), Config: imp.Record.Config}
	return out, nil
}

// ImageRoot is an imported image or a snapshot made ready for a sandbox:
// its layer trees, bottom first, leased until Lease is released, over the
// host's system directories when HostBase is set, and its config.
type ImageRoot struct {
	Ref      string
	HostBase bool
	Layers   []string
	Config   rootfs.Config
	Lease    *store.Lease
}

// ImageRoot resolves an image the cache holds (a reference, image/<ref> or
// sha256:<digest>) or a snapshot (snapshot/<name>) and leases its layers.
// Errors wrap rootfs.ErrNoImage when there is no such image,
// rootfs.ErrNoSnapshot when there is no such snapshot.
func (c *Cache) ImageRoot(ctx context.Context, name string) (ImageRoot, error) {
	src, err := c.imageSource(name)
	if err != nil {
		return ImageRoot{}, err
	}
	ref := src.String()
	root, err := src.Root(ctx, c.st())
	if err != nil {
		return ImageRoot{}, err
	}
	lease, err := c.st().Lease(ctx, root.Layers...)
	if err != nil {
		return ImageRoot{}, fmt.Errorf("leasing the layers of %s: %w", ref, err)
	}
	out := ImageRoot{Ref: ref, HostBase: root.HostBase, Config: root.Config, Lease: lease}
	for _, id := range root.Layers {
		out.Layers = append(out.Layers, c.st().TreePath(id))
	}
	return out, nil
}

// imageSource is the snapshot or the imported image name means.
func (c *Cache) imageSource(name string) (rootfs.Source, error) {
	if snap, ok := rootfs.Resolve(c.st(), name).(rootfs.Snapshot); ok {
		return snap, nil
	}
	ref, err := rootfs.ImageRef(c.st(), name)
	if err != nil {
		return nil, err
	}
	return rootfs.Image{Ref: ref}, nil
}

// ImageInfo is one imported image in the cache's inventory.
type ImageInfo struct {
	Digest   string   `json:"digest"`
	Platform string   `json:"platform,omitempty"`
	Refs     []string `json:"refs"`
	Layers   int      `json:"layers"`
	// FileBytes sums the image's file sizes; DiskBytes the disk its layers'
	// files take, each layer counted alone; SharedBytes the part of that
	// also used elsewhere: whole layers another image has too, and files
	// other layers (environments, repositories) hold.
	FileBytes   int64 `json:"file_bytes"`
	DiskBytes   int64 `json:"disk_bytes"`
	SharedBytes int64 `json:"shared_bytes"`
}

// Images lists the imported images with their sizes, by digest.
func (c *Cache) Images(ctx context.Context) ([]ImageInfo, error) {
	u, err := c.st().Usage(ctx)
	if err != nil {
		return nil, err
	}
	byLayer := map[store.LayerID]store.LayerUsage{}
	for _, l := range u.Layers {
		byLayer[l.ID] = l
	}
	var out []ImageInfo
	var layers [][]store.LayerID
	seen := map[store.LayerID]int{} // record layer -> index in out
	owners := map[store.LayerID]int{}
	for _, l := range u.Layers {
		for _, ref := range l.Refs {
			if !strings.HasPrefix(ref, "image/") {
				continue
			}
			if i, ok := seen[l.ID]; ok {
				out[i].Refs = append(out[i].Refs, ref)
				continue
			}
			rec, err := rootfs.ReadRecord(ctx, c.st(), ref)
			if err != nil {
				return nil, err
			}
			seen[l.ID] = len(out)
			out = append(out, ImageInfo{Digest: rec.Digest, Platform: rec.Platform, Refs: []string{ref}, Layers: len(rec.Layers)})
			layers = append(layers, rec.Layers)
			for _, id := range rec.Layers {
				owners[id]++
			}
		}
	}
	for i := range out {
		for _, id := range layers[i] {
			lu := byLayer[id]
			out[i].FileBytes += lu.LogicalBytes
			out[i].DiskBytes += lu.DiskBytes
			if owners[id] > 1 {
				out[i].SharedBytes += lu.DiskBytes
			} else {
				out[i].SharedBytes += lu.DiskBytes - lu.UniqueBytes
			}
		}
	}
	if out == nil {
		out = []ImageInfo{}
	}
	return out, nil
}
