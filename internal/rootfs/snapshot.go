package rootfs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/store"
)

// A snapshot's store format: what a sandbox wrote is one layer (its "data
// layer") whose parents are the layers the sandbox was made of. The ref
// snapshot/<name> points at a "record layer" over the data layer holding
// only snapshotFile, the SnapshotRecord. The record thus travels with the
// ref wherever refs go (export, import, pull), gc keeps the data layer and
// its parents through it, and it outlives the daemon.

// SnapshotRefPrefix begins the ref of every named snapshot.
const SnapshotRefPrefix = "snapshot/"

// snapshotFile is a snapshot record layer's one file.
const snapshotFile = "msb-snapshot.json"

// ErrNoSnapshot: the store holds no snapshot of that name (or the name
// cannot be one).
var ErrNoSnapshot = errors.New("no such snapshot")

// snapshotName is what a snapshot may be called: a single ref segment.
// It is compiled on first use, not at start-up.
var snapshotName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+=:,~-]{0,127}$`)
})

// ValidSnapshotName reports whether name can name a snapshot.
func ValidSnapshotName(name string) bool { return snapshotName().MatchString(name) }

// SnapshotRef is the ref of the snapshot called name.
func SnapshotRef(name string) string { return SnapshotRefPrefix + name }

// SnapshotRecord is a snapshot's description (SnapshotInfo.Layer is its
// data layer) plus what its sandbox was made of.
type SnapshotRecord struct {
	api.SnapshotInfo
	// Base is the layers, bottom first, below the data layer; HostBase
	// says the host's system directories are below them.
	Base     []store.LayerID `json:"base"`
	HostBase bool            `json:"host_base"`
	// ImageLayers is how many of Base are an image's own (the sandbox's
	// sandbox.Config.ImageLayers); 0 when its sandbox had no image below
	// other layers, or in records written before it was kept.
	ImageLayers int `json:"image_layers,omitempty"`
	// Workdir and Env are the source sandbox's: the root's defaults.
	Workdir string   `json:"workdir,omitempty"`
	Env     []string `json:"env,omitempty"`
	// User is the source sandbox's user, which a fork of the snapshot
	// alone and a sandbox made on it as an image run as; zero (root) in
	// records written before it was kept.
	User SnapshotUser `json:"user,omitzero"`
	// Sudo is the source sandbox's sudo path (sandbox.Config.Sudo), which
	// a fork of the snapshot alone keeps; "" for none.
	Sudo string `json:"sudo,omitempty"`
}

// SnapshotUser is a snapshot's user: the uid and gid its commands ran as.
type SnapshotUser struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
}

// Image is the user as an image's USER names it: "uid:gid", or "" for
// root (what an image without a USER runs as).
func (u SnapshotUser) Image() string {
	if u == (SnapshotUser{}) {
		return ""
	}
	return fmt.Sprintf("%d:%d", u.UID, u.GID)
}

// Data is the record's data layer.
func (r *SnapshotRecord) Data() (store.LayerID, error) {
	id, err := store.ParseLayerID(r.Layer)
	if err != nil {
		return id, fmt.Errorf("snapshot %q: its record: %w", r.Name, err)
	}
	return id, nil
}

// Snapshot is a named snapshot as an environment source: its root is the
// layers its sandbox was made of with the data layer on top (the record
// layer left out), over the host's directories when its sandbox ran on
// them, with the sandbox's environment, working directory and user as
// defaults (the user as Config.User, "uid:gid").
type Snapshot struct {
	Name string
}

// Root reads the snapshot's record and checks its layers are in the store.
// The layers are the record's, as its sandbox mounted them, not the data
// layer's store.Stack (whose depth-first order may differ).
func (s Snapshot) Root(ctx context.Context, st *store.Store) (Root, error) {
	rec, err := s.Record(ctx, st)
	if err != nil {
		return Root{}, err
	}
	data, err := rec.Data()
	if err != nil {
		return Root{}, err
	}
	layers := append(slices.Clone(rec.Base), data)
	for _, id := range layers {
		if !st.Has(id) {
			return Root{}, fmt.Errorf("snapshot %q: layer %s: %w", s.Name, id.Short(), store.ErrNotFound)
		}
	}
	return Root{HostBase: rec.HostBase, Layers: layers, Image: rec.Image(), Config: Config{Env: rec.Env, WorkingDir: rec.Workdir, User: rec.User.Image()}}, nil
}

// Image is how many of the snapshot's layers (Base, then the data layer)
// are an image's own, where a rootless sandbox on them splits its shifted
// layers (Root.Image): the image's that the record names, else all of
// Base, so that the snapshot's own layer gets a shifted layer of its own,
// chained on the one of its sandbox's stack (which that sandbox made, and
// a sandbox on that stack shares), never one of the whole stack. 0 for
// none (no Base).
func (r *SnapshotRecord) Image() int {
	if r.ImageLayers > 0 && r.ImageLayers <= len(r.Base) {
		return r.ImageLayers
	}
	return len(r.Base)
}

func (s Snapshot) String() string { return SnapshotRef(s.Name) }

// Record reads the snapshot's record; the error wraps ErrNoSnapshot when
// there is none of that name.
func (s Snapshot) Record(ctx context.Context, st *store.Store) (SnapshotRecord, error) {
	if !ValidSnapshotName(s.Name) {
		return SnapshotRecord{}, fmt.Errorf("%w: %q", ErrNoSnapshot, s.Name)
	}
	rl, err := st.Ref(SnapshotRef(s.Name))
	if errors.Is(err, store.ErrNotFound) {
		return SnapshotRecord{}, fmt.Errorf("%w: %q", ErrNoSnapshot, s.Name)
	}
	if err != nil {
		return SnapshotRecord{}, err
	}
	path, err := st.Materialize(ctx, rl)
	if err != nil {
		return SnapshotRecord{}, fmt.Errorf("snapshot %q: %w", s.Name, err)
	}
	b, err := os.ReadFile(filepath.Join(path, snapshotFile))
	if err != nil {
		return SnapshotRecord{}, fmt.Errorf("snapshot %q: reading its record: %w", s.Name, err)
	}
	var rec SnapshotRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return SnapshotRecord{}, fmt.Errorf("snapshot %q: its record: %w", s.Name, err)
	}
	if rec.Sessions == nil {
		rec.Sessions = api.List[api.SnapshotSession]{}
	}
	return rec, nil
}

// WriteSnapshot commits rec's record layer over its data layer (in the
// store) and points the ref of rec.Name at it.
func WriteSnapshot(ctx context.Context, st *store.Store, rec SnapshotRecord) error {
	staged, err := StageSnapshot(ctx, st, rec)
	if err != nil {
		return err
	}
	if err := st.Publish(ctx, SnapshotRef(rec.Name), staged); err != nil {
		return fmt.Errorf("saving snapshot %q: %w", rec.Name, err)
	}
	return nil
}

// StageSnapshot stages rec's record layer over its data layer, which may
// be staged too: store.Publish then publishes the data layer, then this
// one, with the ref SnapshotRef(rec.Name), in one commit's barriers.
func StageSnapshot(ctx context.Context, st *store.Store, rec SnapshotRecord) (*store.Staged, error) {
	data, err := rec.Data()
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, err
	}
	// The record layer is what a commit of a temp dir (mode 0700) holding
	// the record would be, as it was made before.
	staged, err := st.StageFiles(ctx, []store.LayerID{data}, 0o700, store.File{Name: snapshotFile, Mode: 0o644, Data: append(b, '\n')})
	if err != nil {
		return nil, fmt.Errorf("saving snapshot %q: %w", rec.Name, err)
	}
	return staged, nil
}

// SnapshotNames lists the names of the store's snapshots.
func SnapshotNames(st *store.Store) ([]string, error) {
	refs, err := st.Refs()
	if err != nil {
		return nil, fmt.Errorf("listing snapshots: %w", err)
	}
	var out []string
	for _, r := range refs {
		if name, ok := strings.CutPrefix(r.Name, SnapshotRefPrefix); ok {
			out = append(out, name)
		}
	}
	return out, nil
}

// DeleteSnapshot removes a snapshot's name (the error wraps ErrNoSnapshot
// when there is none); gc then frees its layers unless something else
// holds them.
func DeleteSnapshot(st *store.Store, name string) error {
	if !ValidSnapshotName(name) {
		return fmt.Errorf("%w: %q", ErrNoSnapshot, name)
	}
	err := st.DeleteRef(SnapshotRef(name))
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrNoSnapshot, name)
	}
	return err
}
