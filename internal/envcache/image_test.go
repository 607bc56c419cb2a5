package envcache

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/spec"
)

// TestImageBase builds an environment on an imported two-layer image
// (--base image/<ref>): the interpreter is found in the lower layer, the
// task runs on the image's layers with no host dirs, and the image's record
// is not part of the root.
func TestImageBase(t *testing.T) {
	tree := makeRootfs(t)
	img, err := mutate.AppendLayers(empty.Image, dirLayer(t, tree), bytesLayer(t, "etc/marker", "from the image's top layer\n"))
	if err != nil {
		t.Fatal(err)
	}
	repo := makeRepo(t, 4, 64, 1)
	dir := filepath.Join(t.TempDir(), "cache")
	c := openCache(t, Options{Dir: dir, Runtime: testRuntime(t)})
	imp, err := rootfs.Import(t.Context(), c.store, img, rootfs.ImportOptions{Names: []string{"example.com/test/py:1"}})
	if err != nil {
		t.Fatal(err)
	}
	c = openCache(t, Options{Dir: dir, Runtime: c.opts.Runtime, Base: "image/example.com/test/py:1"})
	sp := spec.Spec{Repo: "demo/proj", Version: "1.0", Python: "3.11", Install: "python -c 'import json' && echo ok > " + VenvPath + "/built-on-image"}
	p := prepare(t, c, repo.instance(0), sp)
	joined := strings.Join(p.Layers, ":")
	if p.HostBase || !strings.Contains(joined, imp.Record.Layers[0].Hex()) || !strings.Contains(joined, imp.Record.Layers[1].Hex()) ||
		strings.Contains(joined, imp.RecordLayer.Hex()) {
		t.Fatalf("task layers %v: want the image's two layers and not its record (host base %v)", p.Layers, p.HostBase)
	}
	sb := sandboxOf(t, c.opts.Runtime, p)
	out := sh(t, sb, "read -r x < "+VenvPath+"/built-on-image; echo $x; read -r m < /etc/marker; echo $m; test -e /image.json && echo record-leak; test -e /usr/bin/git && echo host-leak; cd /testbed && python hello.py")
	if out != "ok\nfrom the image's top layer\nhello" && out != "ok\nfrom the image's top layer\nhello\n" {
		t.Fatalf("got %q", out)
	}
}

// dirLayer is an image layer holding a directory tree.
func dirLayer(t *testing.T, root string) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		link := ""
		if fi.Mode()&os.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tw.Close()
	return layerOf(t, buf.Bytes())
}

// bytesLayer is an image layer holding one file.
func bytesLayer(t *testing.T, name, body string) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})
	io.WriteString(tw, body)
	tw.Close()
	return layerOf(t, buf.Bytes())
}

func layerOf(t *testing.T, b []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}
