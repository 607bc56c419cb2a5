package rootfs

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"

	"github.com/minisandbox/msb/internal/store"
)

// OCI whiteout names (image-spec layer.md): ".wh.NAME" deletes NAME from
// the layers below, ".wh..wh..opq" makes its directory opaque, and other
// ".wh..wh." names are the aufs driver's bookkeeping.
const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// view is the merged tree of the image's layers imported so far: the entry
// each visible path has. A layer reads it for the metadata of directories
// it implies, for hard links into lower layers and to refuse writes through
// a lower symlink.
type view map[string]store.Entry

// layerNotes counts what a layer had that the store does not keep.
type layerNotes struct {
	devices, xattrs int
	firstDevice     string
	firstXattr      string
}

// tarLayer turns one layer tar into manifest entries, storing file content
// through w as it streams by.
type tarLayer struct {
	w       *store.LayerWriter
	lower   view
	entries map[string]*store.Entry
	notes   layerNotes
}

// readLayer reads a layer tar to its end and returns its entries (unsorted;
// Commit sorts them).
func readLayer(ctx context.Context, w *store.LayerWriter, lower view, r io.Reader) ([]store.Entry, layerNotes, error) {
	l := &tarLayer{w: w, lower: lower, entries: map[string]*store.Entry{}}
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return nil, l.notes, err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, l.notes, fmt.Errorf("%w: reading layer tar: %v", ErrImage, err)
		}
		if err := l.add(ctx, hdr, tr); err != nil {
			return nil, l.notes, err
		}
	}
	if l.entries["."] == nil {
		root := l.implied(".")
		l.entries["."] = &root
	}
	out := make([]store.Entry, 0, len(l.entries))
	for _, e := range l.entries {
		out = append(out, *e)
	}
	return out, l.notes, nil
}

// cleanName turns a tar entry name into an entry path, refusing names that
// leave the root.
func cleanName(n string) (string, error) {
	if strings.HasPrefix(n, "/") {
		return "", fmt.Errorf("%w: absolute path %q", ErrHostileLayer, n)
	}
	var segs []string
	for seg := range strings.SplitSeq(n, "/") {
		switch seg {
		case "", ".":
			continue
		case "..":
			return "", fmt.Errorf("%w: path %q has a \"..\" element", ErrHostileLayer, n)
		}
		segs = append(segs, seg)
	}
	if len(segs) == 0 {
		return ".", nil
	}
	return strings.Join(segs, "/"), nil
}

func parentOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "."
	}
	return p[:i]
}

func baseOf(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

func join(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// add handles one tar header.
func (l *tarLayer) add(ctx context.Context, hdr *tar.Header, body io.Reader) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	p, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if base := baseOf(p); strings.HasPrefix(base, whiteoutPrefix) {
		return l.whiteout(p, base)
	}
	e := store.Entry{Path: p, Mode: uint32(hdr.Mode) & 0o7777}
	if hdr.Uid < 0 || hdr.Gid < 0 || hdr.Uid > math.MaxUint32 || hdr.Gid > math.MaxUint32 {
		return fmt.Errorf("%w: %q: owner %d:%d out of range", ErrImage, p, hdr.Uid, hdr.Gid)
	}
	e.UID, e.GID = uint32(hdr.Uid), uint32(hdr.Gid)
	e.Xattrs = l.xattrs(p, hdr)
	switch hdr.Typeflag {
	case tar.TypeDir:
		e.Type = store.TypeDir
	case tar.TypeReg, tar.TypeRegA:
		e.Type = store.TypeFile
		e.Size = hdr.Size
		if err := l.parents(p); err != nil {
			return err
		}
		if err := l.w.AddFile(ctx, &e, sourceReader{body}); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	case tar.TypeSymlink:
		if hdr.Linkname == "" {
			return fmt.Errorf("%w: symlink %q has no target", ErrImage, p)
		}
		e.Type, e.Target = store.TypeSymlink, hdr.Linkname
	case tar.TypeLink:
		return l.hardlink(p, hdr.Linkname)
	case tar.TypeFifo:
		e.Type = store.TypeFifo
	case tar.TypeChar, tar.TypeBlock:
		if l.notes.devices == 0 {
			l.notes.firstDevice = p
		}
		l.notes.devices++
		return nil
	default:
		return fmt.Errorf("%w: %q: tar entry type %q", ErrUnsupported, p, hdr.Typeflag)
	}
	return l.put(e)
}

// paxXattr prefixes the PAX records that carry extended attributes (GNU
// tar's and the runtimes' spelling; archive/tar's Xattrs field is
// deprecated in their favour).
const paxXattr = "SCHILY.xattr."

// xattrs returns the extended attributes a tar entry carries that a
// runtime would apply (store.ValidXattrName: the file capability,
// trusted.* and user.*), sorted; the rest (security.selinux, ACLs,
// overlay markers, a capability the kernel would refuse) is counted in the
// layer's notes and dropped.
func (l *tarLayer) xattrs(p string, hdr *tar.Header) []store.Xattr {
	var xs []store.Xattr
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, paxXattr)
		if !ok {
			continue
		}
		if !store.ValidXattrName(name) || len(v) > maxXattrValue || name == "security.capability" && !validCapability(v) {
			if l.notes.xattrs == 0 {
				l.notes.firstXattr = name + " on " + p
			}
			l.notes.xattrs++
			continue
		}
		xs = append(xs, store.Xattr{Name: name, Value: []byte(v)})
	}
	store.SortXattrs(xs)
	return xs
}

// validCapability reports whether v is a security.capability value the
// kernel takes: revision 1 (12 bytes), 2 (20) or 3 (24, with the root uid
// of the user namespace it applies in), little-endian magic first.
func validCapability(v string) bool {
	if len(v) < 4 {
		return false
	}
	switch rev := uint32(v[3]) << 24; {
	case rev == 0x01000000:
		return len(v) == 12
	case rev == 0x02000000:
		return len(v) == 20
	case rev == 0x03000000:
		return len(v) == 24
	}
	return false
}

// maxXattrValue is the kernel's limit on an attribute's value (XATTR_SIZE_MAX).
const maxXattrValue = 64 * 1024

// put adds an entry, replacing what the layer had at its path (a later
// tar entry wins, as when extracting).
func (l *tarLayer) put(e store.Entry) error {
	if e.Path != "." {
		if err := l.parents(e.Path); err != nil {
			return err
		}
	}
	if old := l.entries[e.Path]; old != nil && old.Type == store.TypeDir {
		if e.Type == store.TypeDir {
			e.Opaque = old.Opaque
		} else {
			l.dropUnder(e.Path)
		}
	}
	l.entries[e.Path] = &e
	return nil
}

// parents makes sure every directory above p is a directory entry of the
// layer: a directory the layer lists, or one implied with the metadata the
// lower layers give it. A path through a symlink (of this layer or below)
// is refused: extracting it would write through the link.
func (l *tarLayer) parents(p string) error {
	var anc []string
	for d := parentOf(p); ; d = parentOf(d) {
		anc = append(anc, d)
		if d == "." {
			break
		}
	}
	for i := len(anc) - 1; i >= 0; i-- {
		d := anc[i]
		if e := l.entries[d]; e != nil && e.Type != store.TypeDelete {
			if e.Type != store.TypeDir {
				return l.through(p, d, e.Type)
			}
			continue
		}
		if le, ok := l.lower[d]; ok && le.Type != store.TypeDir && l.entries[d] == nil {
			return l.through(p, d, le.Type)
		}
		e := l.implied(d)
		l.entries[d] = &e
	}
	return nil
}

func (l *tarLayer) through(p, d string, t store.EntryType) error {
	if t == store.TypeSymlink {
		return fmt.Errorf("%w: %q is written through the symlink %q", ErrHostileLayer, p, d)
	}
	return fmt.Errorf("%w: %q is under %q, which is a %s", ErrImage, p, d, t)
}

// implied is a directory entry for d that the tar does not list: the lower
// layers' metadata (extended attributes too) for it, or 0755 root:root.
func (l *tarLayer) implied(d string) store.Entry {
	if le, ok := l.lower[d]; ok && le.Type == store.TypeDir {
		return store.Entry{Path: d, Type: store.TypeDir, Mode: le.Mode, UID: le.UID, GID: le.GID, Xattrs: le.Xattrs}
	}
	return store.Entry{Path: d, Type: store.TypeDir, Mode: 0o755}
}

// whiteout handles a .wh. entry at p.
func (l *tarLayer) whiteout(p, base string) error {
	dir := parentOf(p)
	switch {
	case base == whiteoutOpaque:
		if err := l.parents(p); err != nil {
			return err
		}
		l.entries[dir].Opaque = true
		return nil
	case strings.HasPrefix(base, whiteoutMeta):
		return nil
	}
	name := strings.TrimPrefix(base, whiteoutPrefix)
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("%w: whiteout %q names no file", ErrHostileLayer, p)
	}
	target := join(dir, name)
	if err := l.parents(target); err != nil {
		return err
	}
	if l.entries[target] == nil {
		l.entries[target] = &store.Entry{Path: target, Type: store.TypeDelete}
	}
	return nil
}

// hardlink adds p as another name of a file this layer or a lower one has.
func (l *tarLayer) hardlink(p, linkname string) error {
	t, err := cleanName(linkname)
	if err != nil {
		return fmt.Errorf("hard link %q: %w", p, err)
	}
	var src store.Entry
	if e := l.entries[t]; e != nil {
		src = *e
	} else if le, ok := l.lower[t]; ok {
		src = le
	} else {
		return fmt.Errorf("%w: hard link %q to %q, which no layer holds", ErrImage, p, t)
	}
	if src.Type != store.TypeFile {
		return fmt.Errorf("%w: hard link %q to %q, a %s", ErrUnsupported, p, t, src.Type)
	}
	src.Path = p
	src.Opaque = false
	return l.put(src)
}

// dropUnder removes the layer's entries below dir.
func (l *tarLayer) dropUnder(dir string) {
	prefix := dir + "/"
	for p := range l.entries {
		if strings.HasPrefix(p, prefix) {
			delete(l.entries, p)
		}
	}
}

// apply merges a committed layer's entries into the view.
func (v view) apply(entries []store.Entry) {
	gone := map[string]bool{}    // paths whose descendants go
	deleted := map[string]bool{} // paths that go themselves
	for i := range entries {
		e := &entries[i]
		switch {
		case e.Type == store.TypeDelete:
			deleted[e.Path], gone[e.Path] = true, true
		case e.Type == store.TypeDir && e.Opaque:
			gone[e.Path] = true
		case e.Type != store.TypeDir:
			gone[e.Path] = true
		}
	}
	if len(gone) > 0 {
		for p := range v {
			if deleted[p] || underAny(p, gone) {
				delete(v, p)
			}
		}
	}
	for _, e := range entries {
		if e.Type != store.TypeDelete {
			e.Opaque = false
			v[e.Path] = e
		}
	}
}

// underAny reports whether a strict ancestor of p is in set.
func underAny(p string, set map[string]bool) bool {
	for d := p; d != "."; {
		d = parentOf(d)
		if set[d] {
			return true
		}
	}
	return false
}

// log says what a layer had that the store does not keep.
func (n layerNotes) log(log *slog.Logger, layer int) {
	if n.devices > 0 {
		log.Warn("image layer: device nodes skipped (a sandbox has its own /dev)", "layer", layer, "count", n.devices, "first", n.firstDevice)
	}
	if n.xattrs > 0 {
		log.Warn("image layer: extended attributes other than security.capability, trusted.* and user.* dropped", "layer", layer, "count", n.xattrs, "first", n.firstXattr)
	}
}

// sourceReader marks the errors of reading the image (a truncated or
// corrupt stream) as ErrImage, so that they are told apart from the
// store's own (a full disk) when AddFile fails.
type sourceReader struct{ r io.Reader }

func (s sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		err = &readError{err}
	}
	return n, err
}

// readError is an error reading an image: errors.Is(err, ErrImage) holds.
type readError struct{ err error }

func (e *readError) Error() string        { return "reading the image: " + e.err.Error() }
func (e *readError) Unwrap() error        { return e.err }
func (e *readError) Is(target error) bool { return target == ErrImage }
