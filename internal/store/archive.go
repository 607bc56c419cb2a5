package store

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
)

// ArchiveVersion is the export format version (msb-export.json "version").
const ArchiveVersion = 1

// maxManifestSize bounds a manifest read from an archive or the network.
const maxManifestSize = 256 << 20

const archiveHeaderName = "msb-export.json"

type archiveHeader struct {
	Version int                `json:"version"`
	Layers  []LayerID          `json:"layers"` // parents before children
	Refs    map[string]LayerID `json:"refs,omitempty"`
}

// ExportOptions choose what Export writes.
type ExportOptions struct {
	// Layers to export; their parents are always included.
	Layers []LayerID
	// Refs to export, with the layers they point at.
	Refs []string
	// Level is the zstd level (default zstd.SpeedDefault).
	Level zstd.EncoderLevel
}

// Export writes a zstd-compressed tar stream holding the chosen layers,
// their parents, their objects and refs (see docs/store-format.md).
func (s *Store) Export(ctx context.Context, w io.Writer, opts ExportOptions) error {
	unlock, err := s.lock(ctx, false)
	if err != nil {
		return err
	}
	defer unlock()
	hdr := archiveHeader{Version: ArchiveVersion, Refs: map[string]LayerID{}}
	roots := append([]LayerID(nil), opts.Layers...)
	for _, name := range opts.Refs {
		id, err := s.Ref(name)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		hdr.Refs[name] = id
		roots = append(roots, id)
	}
	// Parents first: reverse of a stack is a valid order within it; across
	// stacks, a layer already placed is skipped.
	placed := map[LayerID]bool{}
	manifests := map[LayerID][]byte{}
	for _, root := range roots {
		stack, err := s.Stack(root)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		for i := len(stack) - 1; i >= 0; i-- {
			id := stack[i]
			if placed[id] {
				continue
			}
			b, err := s.manifestBytes(id)
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			placed[id] = true
			manifests[id] = b
			hdr.Layers = append(hdr.Layers, id)
		}
	}

	level := opts.Level
	if level == 0 {
		level = zstd.SpeedDefault
	}
	zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(level))
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	add := func(name string, size int64, body io.Reader) error {
		th := &tar.Header{Name: name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(th); err != nil {
			return err
		}
		n, err := io.Copy(tw, body)
		if err == nil && n != size {
			err = fmt.Errorf("%s: %w: %d bytes, want %d", name, ErrSizeMismatch, n, size)
		}
		return err
	}
	hb, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	if err := add(archiveHeaderName, int64(len(hb)), bytes.NewReader(hb)); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	sizes := map[Digest]int64{}
	var order []Digest
	for _, id := range hdr.Layers {
		b := manifests[id]
		if err := add("manifests/"+id.Hex()+".json", int64(len(b)), bytes.NewReader(b)); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		m, err := DecodeManifest(b)
		if err != nil {
			return fmt.Errorf("export: layer %s: %w", id, err)
		}
		for i := range m.Entries {
			if e := &m.Entries[i]; e.Type == TypeFile {
				if _, ok := sizes[e.Digest]; !ok {
					sizes[e.Digest] = e.Size
					order = append(order, e.Digest)
				}
			}
		}
	}
	for _, d := range order {
		if err := ctx.Err(); err != nil {
			return err
		}
		f, err := s.OpenObject(d)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		err = add("objects/sha256/"+d.Hex(), sizes[d], f)
		f.Close()
		if err != nil {
			return fmt.Errorf("export: object %s: %w", d, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// ImportReport says what Import added.
type ImportReport struct {
	Layers  []LayerID `json:"layers"`  // layers in the archive, parents first
	Objects int       `json:"objects"` // objects that were new to this store
	Bytes   int64     `json:"bytes"`   // their size
	Refs    []string  `json:"refs"`    // refs set
}

// Import reads a stream written by Export: it verifies every manifest and
// object against its digest, stores what is new, materializes the layers
// and then sets the refs. On error no ref is changed; objects and manifests
// already stored are left for GC.
func (s *Store) Import(ctx context.Context, r io.Reader) (ImportReport, error) {
	var rep ImportReport
	unlock, err := s.lock(ctx, false)
	if err != nil {
		return rep, err
	}
	defer unlock()
	rep, err = s.importStream(ctx, r)
	if err != nil {
		return rep, fmt.Errorf("import: %w", err)
	}
	return rep, nil
}

func (s *Store) importStream(ctx context.Context, r io.Reader) (ImportReport, error) {
	var rep ImportReport
	zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return rep, fmt.Errorf("%w: %v", ErrBadArchive, err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)

	th, err := tr.Next()
	if err != nil {
		return rep, fmt.Errorf("%w: reading header: %v", ErrBadArchive, err)
	}
	if th.Name != archiveHeaderName {
		return rep, fmt.Errorf("%w: first entry is %q, want %q", ErrBadArchive, th.Name, archiveHeaderName)
	}
	var hdr archiveHeader
	if err := json.NewDecoder(io.LimitReader(tr, 64<<20)).Decode(&hdr); err != nil {
		return rep, fmt.Errorf("%w: header: %v", ErrBadArchive, err)
	}
	if hdr.Version != ArchiveVersion {
		return rep, fmt.Errorf("%w: archive version %d", ErrVersion, hdr.Version)
	}
	for name := range hdr.Refs {
		if err := validRef(name); err != nil {
			return rep, err
		}
	}

	manifests := map[LayerID]*Manifest{}
	manifestBytes := map[LayerID][]byte{} // stored only after the objects are published
	firstKey := map[Digest]*inodeKey{}
	var pending []pendingObject
	defer func() { discard(pending) }()
	for {
		th, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return rep, fmt.Errorf("%w: %v", ErrBadArchive, err)
		}
		if th.Typeflag != tar.TypeReg {
			return rep, fmt.Errorf("%w: entry %q is not a regular file", ErrBadArchive, th.Name)
		}
		switch {
		case strings.HasPrefix(th.Name, "manifests/"):
			h, ok := strings.CutSuffix(strings.TrimPrefix(th.Name, "manifests/"), ".json")
			d, err := parseHexDigest(h)
			if !ok || err != nil || th.Size > maxManifestSize {
				return rep, fmt.Errorf("%w: bad manifest entry %q", ErrBadArchive, th.Name)
			}
			b, err := io.ReadAll(io.LimitReader(tr, maxManifestSize))
			if err != nil {
				return rep, fmt.Errorf("%w: %v", ErrBadArchive, err)
			}
			id := LayerID(d)
			m, err := checkManifest(id, b)
			if err != nil {
				return rep, err
			}
			manifests[id], manifestBytes[id] = m, b
			for i := range m.Entries {
				if e := &m.Entries[i]; e.Type == TypeFile && firstKey[e.Digest] == nil {
					k := s.keyOf(e).withoutXattrs() // objects carry no xattrs
					firstKey[e.Digest] = &k
				}
			}
		case strings.HasPrefix(th.Name, "objects/sha256/"):
			d, err := parseHexDigest(strings.TrimPrefix(th.Name, "objects/sha256/"))
			if err != nil {
				return rep, fmt.Errorf("%w: bad object entry %q", ErrBadArchive, th.Name)
			}
			key := firstKey[d]
			if key == nil {
				return rep, fmt.Errorf("%w: object %s is used by no manifest before it", ErrBadArchive, d)
			}
			if s.HasObject(d) {
				continue
			}
			p, err := s.writeTemp(ctx, tr, th.Size, d, key, false)
			if err != nil {
				return rep, err
			}
			pending = append(pending, p)
			rep.Objects++
			rep.Bytes += th.Size
		default:
			return rep, fmt.Errorf("%w: unexpected entry %q", ErrBadArchive, th.Name)
		}
	}
	if err := s.publish(pending); err != nil {
		return rep, err
	}
	pending = nil
	for _, id := range hdr.Layers {
		m := manifests[id]
		if m == nil {
			return rep, fmt.Errorf("%w: layer %s listed but its manifest is missing", ErrBadArchive, id)
		}
		for _, p := range m.Parents {
			if !s.Has(p) {
				return rep, fmt.Errorf("layer %s: parent %s: %w", id, p, ErrNotFound)
			}
		}
		if _, err := s.putManifest(manifestBytes[id]); err != nil {
			return rep, err
		}
		if _, err := s.materialize(ctx, id, m); err != nil {
			return rep, err
		}
		rep.Layers = append(rep.Layers, id)
	}
	for name, id := range hdr.Refs {
		if !s.Has(id) {
			return rep, fmt.Errorf("%w: ref %s points at %s, which is not in the archive or store", ErrBadArchive, name, id)
		}
	}
	for name, id := range hdr.Refs {
		if err := s.setRef(name, id); err != nil {
			return rep, err
		}
		rep.Refs = append(rep.Refs, name)
	}
	return rep, nil
}

// checkManifest verifies manifest bytes against the layer digest they came
// under and decodes them. It does not store them: a manifest is written only
// once every object its files use is in the store (a transfer cut short
// leaves no layer that names missing objects).
func checkManifest(want LayerID, b []byte) (*Manifest, error) {
	if got := LayerID(DigestOf(b)); got != want {
		return nil, fmt.Errorf("manifest of layer %s hashes to %s: %w", want, got, ErrDigestMismatch)
	}
	m, err := DecodeManifest(b)
	if err != nil {
		return nil, fmt.Errorf("layer %s: %w", want, err)
	}
	return m, nil
}
