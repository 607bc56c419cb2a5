package envcache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"

	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/sandbox/wire"
	"github.com/minisandbox/msb/internal/store"
)

// A rootless store materializes every file as its caller, root inside a
// sandbox. A rootless sandbox whose user is not root (an image's USER) gets
// the owners of the image's files back (rootfs.Owners) from a shifted
// layer: a copy of the owned paths, and of the directories above them, as
// the overlay of the layers shows them, its files owned on disk by the
// subordinate ids the sandbox's user namespace maps their owners to, with
// their modes (setuid and setgid too), times, extended attributes, symlink
// targets and hard links. It is made once per stack of layers and id maps
// (the key: the layers' ids, which fix their manifests and so their
// owners, and SubIDMaps; other maps, another key), kept in the store beside
// the layers (store.Shifted) and mounted by every such sandbox as the lower
// dir right above the stack, so no file is copied up into the sandbox's
// memory-backed writable layer. Its directories stay the caller's (who can
// then remove the tree): init chowns the owned ones in the overlay, which
// copies up an inode each, not their contents. Init also still chowns the
// owned paths that layers above the shifted stack list (a snapshot's), at
// the cost of copying those up, as before.

// shiftVersion is in every key: a change in what a shifted tree holds
// (the rule of rootfs.Owners, the copy) takes a new version.
const shiftVersion = "msb-shift-1"

// Shifter is the sandbox.Shifter over st: see above. For a stack of
// layers (bottom first) it uses the shifted tree of the longest bottom
// part of the stack that has one, else makes one for the whole stack.
func Shifter(st *store.Store) sandbox.Shifter {
	return func(ctx context.Context, layers []string, owners []sandbox.Owner) ([]string, []sandbox.Owner, error) {
		ids := make([]store.LayerID, len(layers))
		for i, p := range layers {
			id, ok := st.TreeLayer(p)
			if !ok {
				return layers, owners, nil // a host dir, a copy: not the store's
			}
			ids[i] = id
		}
		maps, err := sandbox.SubIDMaps()
		if err != nil {
			return nil, nil, err
		}
		k := len(ids)
		var sh shiftedOwners
		for ; k > 0; k-- {
			if sh, err = readShiftedOwners(filepath.Join(st.Root(), "shifted", shiftKey(ids[:k], maps))); err == nil {
				break
			}
		}
		var below []map[string]*store.Entry
		if k == 0 { // none yet: one for the whole stack
			k = len(ids)
			if below, err = manifests(st, ids); err != nil {
				return nil, nil, err
			}
			if sh.Owners, err = rootfs.Owners(st, ids); err != nil {
				return nil, nil, err
			}
			for _, o := range sh.Owners {
				if i := shown(below, o.Path); i < 0 || below[i][o.Path].Type == store.TypeDir {
					sh.Dirs = append(sh.Dirs, o.Path)
				}
			}
		}
		above, err := manifests(st, ids[k:])
		if err != nil {
			return nil, nil, err
		}
		rest, ok := residue(sh, owners, above)
		if !ok || len(sh.Owners) == len(sh.Dirs) { // nothing a copy spares
			return layers, owners, nil
		}
		tree, err := st.Shifted(ctx, shiftKey(ids[:k], maps), ids[:k], func(ctx context.Context, tree string) error {
			if below == nil { // GC took the tree found above
				var err error
				if below, err = manifests(st, ids[:k]); err != nil {
					return err
				}
			}
			plan, err := shiftPlan(sh, below, layers[:k])
			if err != nil {
				return err
			}
			b, err := json.Marshal(sh)
			if err == nil {
				err = os.WriteFile(filepath.Join(filepath.Dir(tree), shiftedOwnersFile), b, 0o644)
			}
			if err != nil {
				return err
			}
			plan.Dir = tree
			return sandbox.Shift(ctx, plan)
		})
		if err != nil {
			return nil, nil, err
		}
		out := append(append(append(make([]string, 0, len(layers)+1), layers[:k]...), tree), layers[k:]...)
		return out, rest, nil
	}
}

// shiftedOwners, beside a shifted tree (shiftedOwnersFile, JSON), are the
// owners of its layers (rootfs.Owners) and which of them are directories:
// a sandbox on the same layers reads them instead of the layers'
// manifests.
type shiftedOwners struct {
	Owners []rootfs.Owner `json:"owners"`
	// Dirs are the owned paths that are directories. The copy has them
	// as the caller's, so that the caller can remove the tree (unlinking
	// needs a directory of one's own), and init chowns them in the
	// overlay, where a directory's copy-up is an inode, not its contents.
	Dirs []string `json:"dirs"`
}

const shiftedOwnersFile = "owners.json"

// readShiftedOwners reads the owners of the shifted tree in dir; an error
// when there is none.
func readShiftedOwners(dir string) (shiftedOwners, error) {
	var sh shiftedOwners
	b, err := os.ReadFile(filepath.Join(dir, shiftedOwnersFile))
	if err != nil {
		return sh, err
	}
	if err := json.Unmarshal(b, &sh); err != nil {
		return sh, fmt.Errorf("%s: %w", dir, err)
	}
	return sh, nil
}

// manifests are the entries of the layers ids, by path, one map a layer.
func manifests(st *store.Store, ids []store.LayerID) ([]map[string]*store.Entry, error) {
	ms := make([]map[string]*store.Entry, len(ids))
	for i, id := range ids {
		m, err := st.Manifest(id)
		if err != nil {
			return nil, err
		}
		ms[i] = make(map[string]*store.Entry, len(m.Entries))
		for j := range m.Entries {
			ms[i][m.Entries[j].Path] = &m.Entries[j]
		}
	}
	return ms, nil
}

// shiftKey names the shifted tree of layers under maps.
func shiftKey(ids []store.LayerID, maps string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", shiftVersion, maps)
	for _, id := range ids {
		fmt.Fprintf(h, "%s\n", id.Hex())
	}
	return hex.EncodeToString(h.Sum(nil))
}

// residue is the owners init must still give when the shifted tree of
// the stack gives sh and the layers above list the entries of above: of
// owners, those whose paths a layer above lists (or holds something
// under) or hides, the directories, and those sh does not give. ok is
// false when the shifted tree would give a path an owner that owners does
// not ask for: then the sandbox gets no shifted tree.
func residue(sh shiftedOwners, owners []sandbox.Owner, above []map[string]*store.Entry) ([]sandbox.Owner, bool) {
	listed := map[string]bool{} // paths layers above list, and the directories above them
	hides := map[string]bool{}  // paths whose contents a layer above hides or replaces
	for _, m := range above {
		for p, e := range m {
			listed[p] = true
			for d := parentOf(p); d != "" && !listed[d]; d = parentOf(d) {
				listed[d] = true
			}
			if e.Type != store.TypeDir || e.Opaque {
				hides[p] = true
			}
		}
	}
	touched := func(p string) bool {
		if listed[p] {
			return true
		}
		for d := parentOf(p); d != ""; d = parentOf(d) {
			if hides[d] {
				return true
			}
		}
		return false
	}
	gives := make(map[string]rootfs.Owner, len(sh.Owners))
	for _, o := range sh.Owners {
		gives[o.Path] = o
	}
	for _, d := range sh.Dirs {
		delete(gives, d)
	}
	asked := make(map[string]bool, len(owners))
	var rest []sandbox.Owner
	for _, o := range owners {
		asked[o.Path] = true
		if g, ok := gives[o.Path]; ok && !touched(o.Path) && g.UID == o.UID && g.GID == o.GID {
			continue
		}
		rest = append(rest, o)
	}
	for _, o := range sh.Owners {
		if !asked[o.Path] && !touched(o.Path) {
			return nil, false
		}
	}
	return rest, true
}

// parentOf is p's directory ("." for a top-level path, "" for ".").
func parentOf(p string) string {
	if p == "." {
		return ""
	}
	return path.Dir(p)
}

// shiftPlan lists the shifted tree's entries: the owned paths and the
// directories above them ("." first), each copied from the tree of the
// layer whose entry the overlay of layers shows, in path order (a
// directory before what it holds); directories stay the caller's (see
// shiftedOwners.Dirs).
func shiftPlan(sh shiftedOwners, ms []map[string]*store.Entry, trees []string) (wire.ShiftPlan, error) {
	owners := map[string]rootfs.Owner{".": {Path: "."}}
	for _, o := range sh.Owners {
		for d := parentOf(o.Path); d != ""; d = parentOf(d) {
			if _, ok := owners[d]; !ok {
				owners[d] = rootfs.Owner{Path: d}
			}
		}
	}
	for _, o := range sh.Owners {
		owners[o.Path] = o
	}
	for _, d := range sh.Dirs {
		owners[d] = rootfs.Owner{Path: d}
	}
	paths := make([]string, 0, len(owners))
	for p := range owners {
		paths = append(paths, p)
	}
	sort.Slice(paths, func(i, j int) bool { return pathLess(paths[i], paths[j]) })
	var plan wire.ShiftPlan
	for _, p := range paths {
		i := shown(ms, p)
		if i < 0 {
			i = topmostHolding(trees, p)
		}
		if i < 0 {
			return plan, fmt.Errorf("shifting owners: no layer shows /%s", p)
		}
		o := owners[p]
		plan.Entries = append(plan.Entries, wire.ShiftEntry{Path: p, From: trees[i], UID: o.UID, GID: o.GID})
	}
	return plan, nil
}

// pathLess orders paths so that a directory comes before what it holds:
// by their elements ("." first).
func pathLess(a, b string) bool {
	if a == "." || b == "." {
		return a == "." && b != "."
	}
	for a != "" && b != "" {
		ea, ra := cut(a)
		eb, rb := cut(b)
		if ea != eb {
			return ea < eb
		}
		a, b = ra, rb
	}
	return a == "" && b != ""
}

func cut(p string) (string, string) {
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			return p[:i], p[i+1:]
		}
	}
	return p, ""
}

// shown is the index of the layer (of ms, bottom first) whose entry for p
// the overlay shows, or -1: the topmost that lists p, unless a layer above
// it deletes p, or deletes, replaces or makes opaque a directory above it.
func shown(ms []map[string]*store.Entry, p string) int {
	for i := len(ms) - 1; i >= 0; i-- {
		if e, ok := ms[i][p]; ok {
			if e.Type == store.TypeDelete {
				return -1
			}
			return i
		}
		for d := parentOf(p); d != "" && d != "."; d = parentOf(d) {
			if e, ok := ms[i][d]; ok && (e.Type != store.TypeDir || e.Opaque) {
				return -1
			}
		}
	}
	return -1
}

// topmostHolding is the index of the topmost tree holding p as a
// directory (one no manifest lists: the root, a directory a layer
// implies), or -1.
func topmostHolding(trees []string, p string) int {
	for i := len(trees) - 1; i >= 0; i-- {
		if fi, err := os.Lstat(filepath.Join(trees[i], p)); err == nil && fi.IsDir() {
			return i
		}
	}
	return -1
}
