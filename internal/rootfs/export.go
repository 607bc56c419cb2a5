package rootfs

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/minisandbox/msb/internal/atomicfile"
	"github.com/minisandbox/msb/internal/store"
)

// DefaultExportReference names an exported image when neither the
// destination nor the options give a reference.
const DefaultExportReference = "localhost/msb-export:latest"

// ExportOptions tune Export.
type ExportOptions struct {
	// Reference names the image in the archive or layout (a docker-archive's
	// RepoTags, an OCI index's ref.name annotation); a reference given in
	// the destination (FILE:REF) wins; "" is DefaultExportReference.
	Reference string
	// Extra, when set, is one more layer above the root's: these files and
	// symlinks, owned by root, with the directories they need.
	Extra []ExtraFile
}

// ExtraFile is a file (or a symlink, when Target is set) that Export adds
// to the image in a layer of its own.
type ExtraFile struct {
	Path    string // absolute path in the image
	Mode    int64  // permission bits of a file
	Content []byte
	Target  string // a symlink's target
}

// Exported says what Export wrote.
type Exported struct {
	Destination string `json:"destination"`
	Reference   string `json:"reference"`
	// Digest is the image manifest's digest.
	Digest string `json:"digest"`
	Layers int    `json:"layers"`
}

// Export writes a root's layers as an image to dest: oci:DIR[:REF],
// oci-archive:FILE[:REF] or docker-archive:FILE[:REF]. Each store layer
// becomes one image layer (a tar of its entries; deletions as .wh.NAME
// whiteouts, opaque directories as .wh..wh..opq) and the root's Config its
// Env, WorkingDir, User, Entrypoint and Cmd. An archive is written whole
// or not at all (a temp file renamed); a layout directory gains the image
// in its index. A root on the host base cannot be exported (ErrUnsupported).
func Export(ctx context.Context, st *store.Store, root Root, dest string, opts ExportOptions) (*Exported, error) {
	if root.HostBase || len(root.Layers) == 0 {
		return nil, fmt.Errorf("%w: exporting the host's own root (only store layers are exported)", ErrUnsupported)
	}
	transport, where, ok := strings.Cut(dest, ":")
	if !ok || where == "" {
		return nil, fmt.Errorf("%w: destination %q: want oci:DIR, oci-archive:FILE or docker-archive:FILE", ErrUnsupported, dest)
	}
	if transport != TransportOCI && transport != TransportOCIArchive && transport != TransportDocker {
		return nil, fmt.Errorf("%w: export transport %q (oci:, oci-archive:, docker-archive:)", ErrUnsupported, transport)
	}
	path, ref := splitExportRef(where)
	if ref == "" {
		ref = opts.Reference
	}
	if ref == "" {
		ref = DefaultExportReference
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return nil, fmt.Errorf("%w: reference %q: %v", ErrImage, ref, err)
	}
	oci := transport != TransportDocker
	img, err := exportImage(ctx, st, root, oci)
	if err != nil {
		return nil, err
	}
	layers := len(root.Layers)
	if len(opts.Extra) > 0 {
		if img, err = appendExtra(img, opts.Extra, oci); err != nil {
			return nil, err
		}
		layers++
	}
	switch transport {
	case TransportOCI:
		err = writeLayoutDir(path, img, tag)
	case TransportOCIArchive:
		err = writeOCIArchive(path, img, tag)
	case TransportDocker:
		err = writeAtomically(path, func(tmp string) error { return tarball.WriteToFile(tmp, tag, img) })
	}
	if err != nil {
		return nil, fmt.Errorf("writing %s: %w", dest, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	return &Exported{Destination: dest, Reference: tag.String(), Digest: digest.String(), Layers: layers}, nil
}

// splitExportRef splits PATH[:REF] at the first ":" before which stands a
// path whose directory exists (the path itself need not exist yet), so a
// reference keeps its own ":tag" (out.tar:example.com/app:1); without one,
// all of s is the path.
func splitExportRef(s string) (string, string) {
	for i := 1; i < len(s); i++ {
		if s[i] != ':' {
			continue
		}
		if fi, err := os.Stat(filepath.Dir(s[:i])); err == nil && fi.IsDir() {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// exportImage is the image of a root: one layer per store layer, with
// OCI media types when oci is set, else Docker's.
func exportImage(ctx context.Context, st *store.Store, root Root, oci bool) (v1.Image, error) {
	layerType, img := types.DockerLayer, empty.Image
	if oci {
		layerType = types.OCILayer
		img = mutate.MediaType(img, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	}
	for _, id := range root.Layers {
		m, err := st.Manifest(id)
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", id.Short(), err)
		}
		opener := func() (io.ReadCloser, error) { return layerReader(ctx, st, m), nil }
		l, err := tarball.LayerFromOpener(opener, tarball.WithMediaType(layerType), tarball.WithCompressionLevel(gzip.BestSpeed))
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", id.Short(), err)
		}
		if img, err = mutate.Append(img, mutate.Addendum{Layer: l, History: v1.History{CreatedBy: "msb layer " + id.String()}}); err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	c := root.Config
	cf.Config.Env, cf.Config.WorkingDir, cf.Config.User = c.Env, c.WorkingDir, c.User
	cf.Config.Entrypoint, cf.Config.Cmd = c.Entrypoint, c.Cmd
	return mutate.ConfigFile(img, cf)
}

// appendExtra adds files as one more layer of img: a tar of them and
// their parent directories (0755), root's, dated 1970 so the same files
// are the same layer.
func appendExtra(img v1.Image, files []ExtraFile, oci bool) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		p := strings.TrimPrefix(path.Clean(f.Path), "/")
		if !path.IsAbs(f.Path) || p == "" {
			return nil, fmt.Errorf("%w: extra file %q: want an absolute path", ErrUnsupported, f.Path)
		}
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) { // a parent sorts before its children
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		h := &tar.Header{Name: strings.TrimPrefix(path.Clean(f.Path), "/"), Typeflag: tar.TypeReg, Mode: f.Mode,
			Size: int64(len(f.Content)), ModTime: time.Unix(0, 0)}
		if f.Target != "" {
			h.Typeflag, h.Mode, h.Size, h.Linkname = tar.TypeSymlink, 0o777, 0, f.Target
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Content[:h.Size]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerType := types.DockerLayer
	if oci {
		layerType = types.OCILayer
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(layerType), tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return nil, fmt.Errorf("extra layer: %w", err)
	}
	return mutate.Append(img, mutate.Addendum{Layer: l, History: v1.History{CreatedBy: "msb extra files"}})
}

// layerReader streams a layer's tar, written as it is read.
func layerReader(ctx context.Context, st *store.Store, m *store.Manifest) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(writeLayerTar(ctx, st, m, pw))
	}()
	return pr
}

// linkKey identifies the files of one layer that can be one inode in the
// tar: same content and metadata.
type linkKey struct {
	digest   store.Digest
	mode     uint32
	uid, gid uint32
	mtime    int64
	xattrs   string // names and values, NUL-separated
}

// xattrKey is the extended attributes of e as one comparable string.
func xattrKey(e *store.Entry) string {
	var b strings.Builder
	for _, x := range e.Xattrs {
		b.WriteString(x.Name)
		b.WriteByte(0)
		b.WriteString(strconv.Itoa(len(x.Value)))
		b.WriteByte(0)
		b.Write(x.Value)
	}
	return b.String()
}

// writeLayerTar writes a layer's entries as a tar, in the manifest's order
// (a directory before what it holds). Files of the same content and
// metadata after the first are hard links to it, as the store keeps them
// one inode.
func writeLayerTar(ctx context.Context, st *store.Store, m *store.Manifest, w io.Writer) error {
	tw := tar.NewWriter(w)
	first := map[linkKey]string{}
	for i := range m.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := writeEntry(st, tw, &m.Entries[i], first); err != nil {
			return fmt.Errorf("%q: %w", m.Entries[i].Path, err)
		}
	}
	return tw.Close()
}

// writeEntry writes one manifest entry: its header, a file's content, and
// the whiteouts a deletion or an opaque directory becomes.
func writeEntry(st *store.Store, tw *tar.Writer, e *store.Entry, first map[linkKey]string) error {
	if e.Type == store.TypeDelete {
		return writeMarker(tw, join(parentOf(e.Path), whiteoutPrefix+baseOf(e.Path)))
	}
	h := entryHeader(e)
	if e.Type == store.TypeFile && e.Size > 0 {
		k := linkKey{e.Digest, e.Mode, e.UID, e.GID, e.Mtime, xattrKey(e)}
		if target, ok := first[k]; ok {
			h.Typeflag, h.Linkname, h.Size = tar.TypeLink, target, 0
			return tw.WriteHeader(h)
		}
		first[k] = h.Name
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	switch {
	case e.Type == store.TypeFile:
		return copyObject(st, tw, e)
	case e.Type == store.TypeDir && e.Opaque:
		return writeMarker(tw, join(e.Path, whiteoutOpaque))
	}
	return nil
}

// entryHeader is the tar header of a store entry (not a deletion).
func entryHeader(e *store.Entry) *tar.Header {
	h := &tar.Header{Name: e.Path, Mode: int64(e.Mode), Uid: int(e.UID), Gid: int(e.GID), ModTime: time.Unix(0, e.Mtime)}
	if e.Mtime%int64(time.Second) != 0 {
		h.Format = tar.FormatPAX // USTAR and GNU round the time to the second
	}
	if len(e.Xattrs) > 0 {
		h.Format = tar.FormatPAX
		h.PAXRecords = map[string]string{}
		for _, x := range e.Xattrs {
			h.PAXRecords[paxXattr+x.Name] = string(x.Value)
		}
	}
	switch e.Type {
	case store.TypeDir:
		h.Typeflag = tar.TypeDir
		if e.Path == "." {
			h.Name = "./"
		} else {
			h.Name += "/"
		}
	case store.TypeFile:
		h.Typeflag, h.Size = tar.TypeReg, e.Size
	case store.TypeSymlink:
		h.Typeflag, h.Linkname = tar.TypeSymlink, e.Target
	case store.TypeFifo:
		h.Typeflag = tar.TypeFifo
	case store.TypeChar:
		h.Typeflag, h.Devmajor, h.Devminor = tar.TypeChar, int64(e.Major), int64(e.Minor)
	case store.TypeBlock:
		h.Typeflag, h.Devmajor, h.Devminor = tar.TypeBlock, int64(e.Major), int64(e.Minor)
	}
	return h
}

// writeMarker writes an empty whiteout file.
func writeMarker(tw *tar.Writer, p string) error {
	return tw.WriteHeader(&tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: 0o600, ModTime: time.Unix(0, 0)})
}

// copyObject writes a file's content from the store, checking its size.
func copyObject(st *store.Store, w io.Writer, e *store.Entry) error {
	f, err := st.OpenObject(e.Digest)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, e.Size))
	if err != nil {
		return err
	}
	if n != e.Size {
		return fmt.Errorf("%w: object %s has %d bytes, the manifest says %d", store.ErrBadManifest, e.Digest, n, e.Size)
	}
	return nil
}

// writeLayoutDir adds the image to an OCI layout directory, creating it
// when it does not exist.
func writeLayoutDir(dir string, img v1.Image, tag name.Tag) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		if p, err = layout.Write(dir, empty.Index); err != nil {
			return err
		}
	}
	return p.AppendImage(img, layout.WithAnnotations(map[string]string{refNameAnnotation: tag.String()}))
}

// writeOCIArchive writes the image as a layout directory in a temp dir
// beside file, then the tar of that directory as file.
func writeOCIArchive(file string, img v1.Image, tag name.Tag) error {
	tmp, err := os.MkdirTemp(filepath.Dir(file), ".msb-export-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := writeLayoutDir(tmp, img, tag); err != nil {
		return err
	}
	return writeAtomically(file, func(out string) error { return tarTree(tmp, out) })
}

// tarTree writes the files under dir (directories and regular files, as a
// layout has) as a tar at out.
func tarTree(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		return tarFile(tw, dir, p, d)
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

func tarFile(tw *tar.Writer, dir, p string, d os.DirEntry) error {
	fi, err := d.Info()
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return err
	}
	h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: fi.ModTime()}
	switch {
	case fi.IsDir():
		h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
	case fi.Mode().IsRegular():
		h.Typeflag, h.Size = tar.TypeReg, fi.Size()
	default:
		return fmt.Errorf("%s: not a file or directory", p)
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if h.Typeflag != tar.TypeReg {
		return nil
	}
	src, err := os.Open(p)
	if err != nil {
		return err
	}
	defer src.Close()
	_, err = io.Copy(tw, src)
	return err
}

// writeAtomically has write fill a temp file (by its name) beside file,
// then renames it to file; on failure nothing is left. An export is not
// synced: it is made again from the store.
func writeAtomically(file string, write func(tmp string) error) error {
	opts := atomicfile.Options{TempPattern: "." + filepath.Base(file) + ".tmp-*", NoSync: true}
	return atomicfile.WriteFrom(file, opts, func(f *os.File) error { return write(f.Name()) })
}
