package rootfs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/minisandbox/msb/internal/store"
)

// ImportOptions tune Import.
type ImportOptions struct {
	// Names are references to record the image under (image/<name> refs),
	// besides its digest.
	Names []string
	// Log receives what the import drops (device nodes, extended
	// attributes a runtime does not apply).
	Log *slog.Logger
	// Progress, when set, is told of each layer as it is committed.
	Progress func(LayerProgress)
}

// LayerProgress reports one committed layer.
type LayerProgress struct {
	Index, Count int
	DiffID       string
	Layer        store.LayerID
}

// Imported is what Import did.
type Imported struct {
	Record *Record
	// RecordLayer holds the record; Refs are the refs pointed at it.
	RecordLayer store.LayerID
	Refs        []string
}

// Import stores an image: each layer's tar becomes a store layer, streamed
// entry by entry (nothing is extracted to a temp tree) with the layer below
// as its parent; then the record layer and the refs. Every layer's
// uncompressed content is checked against the config's diff_ids and the
// config against its digest. Refs are set last, under one store lock, so
// an import that fails or is killed leaves no ref and nothing half-written
// (unreferenced complete layers, which GC removes). Errors about the image
// wrap ErrImage.
func Import(ctx context.Context, st *store.Store, img v1.Image, opts ImportOptions) (*Imported, error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rec, layers, err := describe(img)
	if err != nil {
		return nil, err
	}
	refs := []string{DigestRef(rec.Digest)}
	for _, n := range opts.Names {
		r, err := NameRef(n)
		if err != nil {
			return nil, err
		}
		refs = append(refs, r)
	}
	w, err := st.NewLayerWriter(ctx)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	lower := view{}
	var parent []store.LayerID
	for i, l := range layers {
		id, err := importLayer(ctx, w, lower, l, rec.DiffIDs[i], parent, log, i)
		if err != nil {
			return nil, fmt.Errorf("layer %d of %d (%s): %w", i+1, len(layers), short(rec.DiffIDs[i]), err)
		}
		rec.Layers = append(rec.Layers, id)
		parent = []store.LayerID{id}
		if opts.Progress != nil {
			opts.Progress(LayerProgress{Index: i, Count: len(layers), DiffID: rec.DiffIDs[i], Layer: id})
		}
	}
	if len(rec.Layers) == 0 {
		return nil, fmt.Errorf("%w: the image has no layers", ErrImage)
	}
	recID, err := writeRecord(ctx, w, rec)
	if err != nil {
		return nil, fmt.Errorf("writing the image record: %w", err)
	}
	for _, r := range refs {
		if err := w.SetRef(r, recID); err != nil {
			return nil, err
		}
	}
	return &Imported{Record: rec, RecordLayer: recID, Refs: refs}, nil
}

func short(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

// describe reads and checks the image's manifest and config.
func describe(img v1.Image) (*Record, []v1.Layer, error) {
	bad := func(what string, err error) error {
		if errors.Is(err, ErrImage) {
			return fmt.Errorf("%s: %w", what, err)
		}
		return fmt.Errorf("%w: %s: %v", ErrImage, what, err)
	}
	mt, err := img.MediaType()
	if err != nil {
		return nil, nil, bad("manifest", err)
	}
	if mt != types.OCIManifestSchema1 && mt != types.DockerManifestSchema2 {
		return nil, nil, fmt.Errorf("%w: manifest media type %s", ErrUnsupported, mt)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, nil, bad("manifest", err)
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		return nil, nil, bad("config", err)
	}
	cname, err := img.ConfigName()
	if err != nil {
		return nil, nil, bad("config", err)
	}
	if got := sha256.Sum256(raw); cname.Algorithm != "sha256" || hex.EncodeToString(got[:]) != cname.Hex {
		return nil, nil, fmt.Errorf("%w: %w: config hashes to sha256:%x, the manifest says %s", ErrImage, store.ErrDigestMismatch, got, cname)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, nil, bad("config", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, nil, bad("layers", err)
	}
	if len(layers) != len(cfg.RootFS.DiffIDs) {
		return nil, nil, fmt.Errorf("%w: %d layers but %d diff_ids in the config", ErrImage, len(layers), len(cfg.RootFS.DiffIDs))
	}
	rec := &Record{Version: RecordVersion, Digest: digest.String(), ConfigDigest: cname.String(), MediaType: string(mt),
		Config: Config{Env: cfg.Config.Env, WorkingDir: cfg.Config.WorkingDir, User: cfg.Config.User,
			Entrypoint: cfg.Config.Entrypoint, Cmd: cfg.Config.Cmd}}
	if cfg.OS != "" {
		rec.Platform = cfg.OS + "/" + cfg.Architecture
	}
	for i, l := range layers {
		lmt, err := l.MediaType()
		if err != nil {
			return nil, nil, bad(fmt.Sprintf("layer %d", i+1), err)
		}
		if !supportedLayer(lmt) {
			return nil, nil, fmt.Errorf("%w: layer %d media type %s", ErrUnsupported, i+1, lmt)
		}
		if cfg.RootFS.DiffIDs[i].Algorithm != "sha256" {
			return nil, nil, fmt.Errorf("%w: diff_id %s", ErrUnsupported, cfg.RootFS.DiffIDs[i])
		}
		rec.DiffIDs = append(rec.DiffIDs, cfg.RootFS.DiffIDs[i].String())
	}
	return rec, layers, nil
}

// importLayer streams one layer into the store and checks its diff_id.
func importLayer(ctx context.Context, w *store.LayerWriter, lower view, l v1.Layer, diffID string, parent []store.LayerID, log *slog.Logger, i int) (store.LayerID, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return store.LayerID{}, fmt.Errorf("%w: opening: %v", ErrImage, err)
	}
	defer rc.Close()
	hr := &hashReader{r: rc, h: sha256.New()}
	entries, notes, err := readLayer(ctx, w, lower, hr)
	if err != nil {
		return store.LayerID{}, err
	}
	// The tar's end-of-archive blocks and any padding count in the diff_id.
	if _, err := io.Copy(io.Discard, hr); err != nil {
		return store.LayerID{}, fmt.Errorf("%w: reading: %v", ErrImage, err)
	}
	if got := "sha256:" + hex.EncodeToString(hr.h.Sum(nil)); got != diffID {
		return store.LayerID{}, fmt.Errorf("%w: %w: content hashes to %s", ErrImage, store.ErrDigestMismatch, got)
	}
	notes.log(log, i+1)
	id, err := w.Commit(ctx, &store.Manifest{Version: store.ManifestVersion, Parents: parent, Entries: entries})
	if err != nil {
		if errors.Is(err, store.ErrBadManifest) {
			return id, fmt.Errorf("%w: %w", ErrImage, err)
		}
		return id, err
	}
	lower.apply(entries)
	return id, nil
}

// hashReader hashes what is read through it.
type hashReader struct {
	r io.Reader
	h hash.Hash
}

func (h *hashReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	return n, err
}
