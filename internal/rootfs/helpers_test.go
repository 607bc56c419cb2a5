package rootfs

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/store"
)

// ent is one tar entry of a test layer.
type ent = demotest.Entry

var (
	file     = demotest.File
	dir      = demotest.Dir
	symlink  = demotest.Symlink
	layerTar = demotest.LayerTar
)

// buildImage makes an image of the layers (bottom first), gzip-compressed
// by go-containerregistry, with cfg's Env and WorkingDir.
func buildImage(t testing.TB, cfg v1.Config, layers ...[]ent) v1.Image {
	t.Helper()
	img := empty.Image
	for _, ents := range layers {
		var err error
		if img, err = mutate.AppendLayers(img, layerOf(t, ents)); err != nil {
			t.Fatal(err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config = cfg
	cf.OS, cf.Architecture = "linux", "amd64"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// layerOf is a gzip layer of the entries.
func layerOf(t testing.TB, ents []ent) v1.Layer {
	t.Helper()
	b := layerTar(t, ents)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// writeLayout writes img as an OCI layout dir with a ref.name annotation.
func writeLayout(t testing.TB, img v1.Image, refName string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	var opts []layout.Option
	if refName != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{refNameAnnotation: refName}))
	}
	if err := p.AppendImage(img, opts...); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeDockerArchive writes img as a docker save archive tagged tag.
func writeDockerArchive(t testing.TB, img v1.Image, tag string) string {
	t.Helper()
	tg, err := name.NewTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "image.tar")
	if err := tarball.WriteToFile(f, tg, img); err != nil {
		t.Fatal(err)
	}
	return f
}

// tarDir writes a directory's files as a tar (an oci-archive of a layout).
func tarDir(t testing.TB, src string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "oci.tar")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "." {
			return nil
		}
		h, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = tw.Write(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// importSource opens a source and imports it.
func importSource(t testing.TB, st *store.Store, source string, opts OpenOptions) (*Imported, error) {
	t.Helper()
	ctx := context.Background()
	o, err := Open(ctx, source, opts)
	if err != nil {
		return nil, err
	}
	defer o.Close()
	return Import(ctx, st, o.Image, ImportOptions{Names: o.Names})
}

// merged applies an image's layers into a fresh dir (the store's copy mode,
// which honours deletions and opaque dirs as overlayfs does).
func merged(t testing.TB, st *store.Store, ref string) (string, Root) {
	t.Helper()
	ctx := context.Background()
	root, err := Image{Ref: ref}.Root(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "root")
	if err := st.ApplyLayers(ctx, dst, root.Layers); err != nil {
		t.Fatal(err)
	}
	return dst, root
}

// mustVerify fails t unless the store verifies clean.
func mustVerify(t testing.TB, st *store.Store) {
	t.Helper()
	rep, err := st.Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("store verify: %v", rep.Problems)
	}
}

// imageRefs lists the store's image/ refs.
func imageRefs(t testing.TB, st *store.Store) []string {
	t.Helper()
	refs, err := st.Refs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range refs {
		if len(r.Name) > 6 && r.Name[:6] == "image/" {
			out = append(out, r.Name)
		}
	}
	return out
}
