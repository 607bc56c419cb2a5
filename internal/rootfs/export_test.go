package rootfs

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/store"
)

// exportCfg is the config of the images the export tests make.
var exportCfg = v1.Config{Env: []string{"PATH=/usr/bin:/bin", "GREETING=hi"}, WorkingDir: "/home/app", User: "1000"}

// importLayoutOf imports an image of the layers into st, returning its record.
func importLayoutOf(t *testing.T, st *store.Store, refName string, layers ...[]ent) *Record {
	t.Helper()
	img := buildImage(t, exportCfg, layers...)
	imp, err := importSource(t, st, "oci:"+writeLayout(t, img, refName), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return imp.Record
}

// exportImported exports the image ref names in st to dest.
func exportImported(t *testing.T, st *store.Store, ref, dest string) *Exported {
	t.Helper()
	ctx := context.Background()
	root, err := Image{Ref: ref}.Root(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := Export(ctx, st, root, dest, ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// TestExportRoundtrip: an image imported, exported in each format and
// imported again into another store gives the same store layers (same
// manifests: entries, modes, owners, deletions, opaque directories, hence
// the same layer ids) and the same config.
func TestExportRoundtrip(t *testing.T) {
	st := openStore(t)
	rec := importLayoutOf(t, st, "example.com/test/img:v1", baseLayer(), topLayer())
	ref := DigestRef(rec.Digest)
	out := t.TempDir()
	for _, dest := range []string{
		"oci:" + filepath.Join(out, "layout") + ":example.com/out/img:2",
		"oci-archive:" + filepath.Join(out, "oci.tar") + ":example.com/out/img:2",
		"docker-archive:" + filepath.Join(out, "docker.tar") + ":example.com/out/img:2",
	} {
		ex := exportImported(t, st, ref, dest)
		if ex.Layers != 2 || ex.Reference != "example.com/out/img:2" {
			t.Errorf("%s: exported %+v", dest, ex)
		}
		st2 := openStore(t)
		imp, err := importSource(t, st2, dest, OpenOptions{})
		if err != nil {
			t.Fatalf("%s: reimport: %v", dest, err)
		}
		if !slices.Equal(imp.Record.Layers, rec.Layers) {
			for i := range rec.Layers {
				diffEntries(t, dest, manifestOf(t, st, rec.Layers[i]), manifestOf(t, st2, imp.Record.Layers[i]))
			}
			t.Fatalf("%s: layers %v, want %v", dest, imp.Record.Layers, rec.Layers)
		}
		c := imp.Record.Config
		if !slices.Equal(c.Env, exportCfg.Env) || c.WorkingDir != exportCfg.WorkingDir || c.User != exportCfg.User {
			t.Errorf("%s: config %+v", dest, c)
		}
		if _, err := ImageRef(st2, "example.com/out/img:2"); err != nil {
			t.Errorf("%s: not named by its reference: %v", dest, err)
		}
		mustVerify(t, st2)
	}
}

func manifestOf(t *testing.T, st *store.Store, id store.LayerID) *store.Manifest {
	t.Helper()
	m, err := st.Manifest(id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// diffEntries reports the entries in which two manifests differ.
func diffEntries(t *testing.T, what string, want, got *store.Manifest) {
	t.Helper()
	byPath := map[string]store.Entry{}
	for _, e := range got.Entries {
		byPath[e.Path] = e
	}
	for _, e := range want.Entries {
		if g, ok := byPath[e.Path]; !ok || !reflect.DeepEqual(g, e) {
			t.Errorf("%s: entry %+v, got %+v", what, e, g)
		}
		delete(byPath, e.Path)
	}
	for _, g := range byPath {
		t.Errorf("%s: extra entry %+v", what, g)
	}
}

// TestExportWhiteoutNames: a deletion and an opaque directory are written
// as OCI whiteout files in the layer tar, and a second file of the same
// content and metadata as a hard link to the first.
func TestExportWhiteoutNames(t *testing.T) {
	st := openStore(t)
	twin := file("etc/twin", "kept and changed\n")
	rec := importLayoutOf(t, st, "", baseLayer(), append(topLayer(), twin))
	dest := filepath.Join(t.TempDir(), "docker.tar")
	exportImported(t, st, DigestRef(rec.Digest), "docker-archive:"+dest)
	o, err := Open(context.Background(), "docker-archive:"+dest, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	layers, err := o.Image.Layers()
	if err != nil || len(layers) != 2 {
		t.Fatalf("layers %d, %v", len(layers), err)
	}
	hdrs := tarHeaders(t, layers[1])
	for _, n := range []string{"etc/.wh.gone", "opaque/.wh..wh..opq"} {
		if h, ok := hdrs[n]; !ok || h.Typeflag != tar.TypeReg || h.Size != 0 {
			t.Errorf("%s: %+v, %v; want an empty whiteout file", n, h, ok)
		}
	}
	keep, twinH := hdrs["etc/keep"], hdrs["etc/twin"]
	if keep == nil || twinH == nil || (twinH.Typeflag != tar.TypeLink && keep.Typeflag != tar.TypeLink) {
		t.Errorf("etc/keep %+v, etc/twin %+v: want one a hard link to the other", keep, twinH)
	}
	if h := hdrs["opaque/"]; h == nil || h.Typeflag != tar.TypeDir {
		t.Errorf("opaque/: %+v", h)
	}
}

// tarHeaders reads a layer's tar headers by name.
func tarHeaders(t *testing.T, l v1.Layer) map[string]*tar.Header {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = h
	}
}

// TestExportRefusals: the host base and unknown transports are refused,
// and a failed export leaves no file behind.
func TestExportRefusals(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "out.tar")
	if _, err := Export(ctx, st, Root{HostBase: true}, "oci-archive:"+out, ExportOptions{}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("host base: %v, want ErrUnsupported", err)
	}
	rec := importLayoutOf(t, st, "", baseLayer())
	root, err := Image{Ref: DigestRef(rec.Digest)}.Root(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	for _, dest := range []string{"docker://example.com/x:1", out, "oci-archive:" + out + ":Not A Ref"} {
		if _, err := Export(ctx, st, root, dest, ExportOptions{}); !errors.Is(err, ErrImage) {
			t.Errorf("%s: %v, want an ErrImage", dest, err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

// TestExportRootless reruns the export tests as an unprivileged user: a
// rootless store keeps the entries' owners in its manifests, and the
// export writes them.
func TestExportRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestExport(Roundtrip|WhiteoutNames|Refusals)$")
}
