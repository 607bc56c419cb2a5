// Package rootfs holds MiniSandbox's environment sources: where the root
// filesystem a sandbox or an environment build runs on comes from.
//
// The nouns:
//
//   - Root: what a sandbox's root is made of: the host's own system
//     directories (HostBase), a stack of store layers, bottom first, or
//     (a snapshot of a sandbox on the host base) layers over the host's
//     directories, plus the defaults the root carries (Config: Env,
//     WorkingDir, User), which a sandbox applies unless its caller
//     overrides them.
//   - Source: anything that can produce a Root from the store (Source.Root);
//     Resolve maps the name a user gives (--base, a spec's base) to one.
//     The engine asks a source for its root and knows nothing else of it.
//     There is one file per source: host.go (the host's system dirs),
//     layer.go (a store layer or ref, such as the base/rootfs that
//     msb cache import-rootfs makes), debian.go (a Debian base msb builds
//     with mmdebstrap), image.go (an imported OCI or Docker image) and
//     snapshot.go (a sandbox's named snapshot).
//   - Snapshot: what a sandbox wrote, one "data layer" whose parents are
//     the sandbox's layers, named by the ref snapshot/<name>, which points
//     at a record layer over the data layer holding the SnapshotRecord
//     (its sandbox, instance, sessions, base layers and defaults). The
//     engine freezes and commits the sandbox; this package keeps the
//     format (StageSnapshot, which the engine publishes with the data
//     layer; WriteSnapshot, Snapshot.Record, SnapshotNames,
//     DeleteSnapshot).
//   - Image: an OCI or Docker image imported into the store. Each of its
//     layer tars becomes a store layer (files deduplicated against the whole
//     store, OCI whiteouts as deletion entries and opaque directories) whose
//     parent is the layer below, so store.Stack of its top layer is the
//     image. A record layer above the top layer holds one JSON file, the
//     image's config and identity (record.go); refs image/<reference> and
//     image/sha256:<manifest digest> point at the record. Import (import.go)
//     reads images from the places transport.go names (OCI layout dirs,
//     docker-archive and oci-archive files, registries, the local podman or
//     docker store) with google/go-containerregistry.
//
// See docs/images.md for the commands and the on-disk records.
package rootfs

import (
	"context"

	"github.com/minisandbox/msb/internal/store"
)

// Config is what a root says about running in it: the defaults a sandbox
// applies unless its caller sets them.
type Config struct {
	// Env is NAME=value pairs, applied before the caller's.
	Env []string `json:"env,omitempty"`
	// WorkingDir is the default working directory ("" for the sandbox's).
	WorkingDir string `json:"working_dir,omitempty"`
	// User is the image's user ("", "name", "uid" or "uid:gid").
	User string `json:"user,omitempty"`
	// Entrypoint and Cmd are kept for reference; msb runs the command it is
	// given.
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
}

// Root is a root filesystem a sandbox can run on.
type Root struct {
	// HostBase: the host's system directories, read-only, are the root
	// (under Layers, when a snapshot of a host-base sandbox has some).
	HostBase bool
	// Layers are store layers, bottom first.
	Layers []store.LayerID
	// Image, when above 0, is how many of Layers are an image's own, the
	// rest being stacked above it (a snapshot's layer, and the layers its
	// sandbox had above its image): a rootless sandbox's shifted layers
	// split there (sandbox.Config.ImageLayers). 0: all of them.
	Image int
	// Config holds the root's defaults.
	Config Config
}

// Top is the root's topmost layer, the one a build on this root names as
// its parent (zero with HostBase).
func (r Root) Top() store.LayerID {
	if len(r.Layers) == 0 {
		return store.LayerID{}
	}
	return r.Layers[len(r.Layers)-1]
}

// Source produces a Root from the store.
type Source interface {
	// Root resolves the source against the store.
	Root(ctx context.Context, st *store.Store) (Root, error)
	// String names the source for messages and keys.
	String() string
}
