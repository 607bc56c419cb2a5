package rootfs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/minisandbox/msb/internal/store"
)

// RecordVersion is the format of the image record this code writes.
const RecordVersion = 1

// recordFile is the record layer's one file.
const recordFile = "image.json"

// Record is an imported image's identity and config, kept in the store as a
// layer holding recordFile whose parent is the image's top layer.
type Record struct {
	Version int `json:"version"`
	// Digest is the image manifest's digest; ConfigDigest its config's.
	Digest       string `json:"digest"`
	ConfigDigest string `json:"config_digest"`
	MediaType    string `json:"media_type"`
	Platform     string `json:"platform,omitempty"`
	// Layers are the store layers of the image, bottom first, one per
	// image layer; DiffIDs the digests of their uncompressed tars.
	Layers  []store.LayerID `json:"layers"`
	DiffIDs []string        `json:"diff_ids"`
	Config  Config          `json:"config"`
}

// DigestRef is the ref naming an image by its manifest digest.
func DigestRef(digest string) string { return "image/" + digest }

// NameRef is the ref naming an image by a reference (normalized).
func NameRef(reference string) (string, error) {
	n, err := NormalizeReference(reference)
	if err != nil {
		return "", err
	}
	return "image/" + n, nil
}

// NormalizeReference spells a reference the one way refs use:
// registry/repository:tag or registry/repository@digest, with Docker Hub's
// defaults filled in (debian → index.docker.io/library/debian:latest).
func NormalizeReference(s string) (string, error) {
	r, err := name.ParseReference(s)
	if err != nil {
		return "", fmt.Errorf("%w: reference %q: %v", ErrImage, s, err)
	}
	switch r := r.(type) {
	case name.Tag:
		return r.Context().Name() + ":" + r.TagStr(), nil
	case name.Digest:
		return r.Context().Name() + "@" + r.DigestStr(), nil
	}
	return r.Name(), nil
}

// imageRef returns the ref of the image a user's string names, when the
// store has it: image/..., sha256:<manifest digest>, or a reference.
func imageRef(st *store.Store, s string) (string, bool) {
	var cands []string
	switch {
	case isDebianName(s):
		cands = append(cands, debianRef(s))
	case strings.HasPrefix(s, "image/"):
		cands = append(cands, s)
	case strings.HasPrefix(s, "sha256:"):
		cands = append(cands, DigestRef(s))
	default:
		if r, err := NameRef(s); err == nil {
			cands = append(cands, r)
		}
	}
	for _, c := range cands {
		if _, err := st.Ref(c); err == nil {
			return c, true
		}
	}
	return "", false
}

// writeRecord commits the record layer over the image's top layer.
func writeRecord(ctx context.Context, w *store.LayerWriter, rec *Record) (store.LayerID, error) {
	return writeRecordFile(ctx, w, rec, rec.Layers[len(rec.Layers)-1])
}

// writeRecordFile commits a layer holding rec as recordFile over top.
func writeRecordFile(ctx context.Context, w *store.LayerWriter, rec any, top store.LayerID) (store.LayerID, error) {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return store.LayerID{}, err
	}
	b = append(b, '\n')
	f := store.Entry{Path: recordFile, Type: store.TypeFile, Mode: 0o444, Size: int64(len(b))}
	if err := w.AddFile(ctx, &f, bytes.NewReader(b)); err != nil {
		return store.LayerID{}, err
	}
	m := &store.Manifest{Version: store.ManifestVersion, Parents: []store.LayerID{top},
		Entries: []store.Entry{{Path: ".", Type: store.TypeDir, Mode: 0o755}, f}}
	return w.Commit(ctx, m)
}

// ReadRecord reads the record of the image a ref names.
func ReadRecord(ctx context.Context, st *store.Store, ref string) (*Record, error) {
	id, err := st.Ref(ref)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNoImage, ref, err)
	}
	m, err := st.Manifest(id)
	if err != nil {
		return nil, err
	}
	tree, err := st.Materialize(ctx, id)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(tree, recordFile))
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not an image record: %w", ErrNoImage, ref, err)
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("image record %s: %w", ref, err)
	}
	if rec.Version != RecordVersion {
		return nil, fmt.Errorf("image record %s: %w: version %d", ref, store.ErrVersion, rec.Version)
	}
	if len(rec.Layers) == 0 || len(m.Parents) != 1 || m.Parents[0] != rec.Layers[len(rec.Layers)-1] {
		return nil, fmt.Errorf("image record %s: %w: its parent is not the image's top layer", ref, store.ErrBadManifest)
	}
	return &rec, nil
}
