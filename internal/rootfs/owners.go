package rootfs

import (
	"fmt"
	"sort"
	"strings"

	"github.com/minisandbox/msb/internal/store"
)

// Owner is a path of a root (relative, slash-separated; "." the root
// itself) whose owner, as its layers' manifests record it, is not 0:0. A
// rootless store materializes every file as its caller, root inside the
// sandbox; a rootless sandbox that maps subordinate ids gives these paths
// their owners back (sandbox.Config.Owners).
type Owner struct {
	Path     string
	UID, GID int
}

// Owners lists the paths of the root the layers make (bottom first) whose
// owner is not root, as the overlay of the layers shows them: a path a
// higher layer lists again has that layer's owner, a deletion hides the
// path and what is under it, and an opaque directory what the layers
// below have under it. A directory comes before what it holds.
func Owners(st *store.Store, layers []store.LayerID) ([]Owner, error) {
	owned := map[string]Owner{} // the paths not owned by root so far
	for _, id := range layers {
		m, err := st.Manifest(id)
		if err != nil {
			return nil, fmt.Errorf("reading the owners of layer %s: %w", id, err)
		}
		for _, e := range m.Entries {
			if e.Type == store.TypeDelete || e.Opaque {
				hideUnder(owned, e.Path)
			}
			if e.Type == store.TypeDelete || e.UID == 0 && e.GID == 0 {
				delete(owned, e.Path)
				continue
			}
			owned[e.Path] = Owner{Path: e.Path, UID: int(e.UID), GID: int(e.GID)}
		}
	}
	out := make([]Owner, 0, len(owned))
	for _, o := range owned {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// hideUnder removes what owned has under dir (dir itself stays).
func hideUnder(owned map[string]Owner, dir string) {
	prefix := dir + "/"
	if dir == "." {
		prefix = ""
	}
	for p := range owned {
		if p != "." && strings.HasPrefix(p, prefix) && p != dir {
			delete(owned, p)
		}
	}
}
