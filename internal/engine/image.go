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
	// Username and Password authenticate to a registry; without them,
	// AuthFile (podman's --authfile), then the docker/podman config files.
	Username, Password, AuthFile string
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
		AuthFile: opts.AuthFile, Insecure: opts.Insecure, TempDir: c.Dir()})
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
