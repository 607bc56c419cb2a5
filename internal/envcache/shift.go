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
	"strconv"

	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/sandbox/wire"
	"github.com/minisandbox/msb/internal/store"
)

// A rootless store materializes every file as its caller, root inside a
// sandbox. A rootless sandbox whose user is not root (an image's USER) gets
// the owners of the image's files back (rootfs.Owners) from a shifted
// layer: a copy of the owned paths, and of the directories above them, as
// the overlay of the layers shows them, owned on disk by the subordinate
// ids the sandbox's user namespace maps their owners to, with their modes
// (setuid and setgid too), times, extended attributes, symlink targets and
// hard links. It is made once per stack of layers and id maps (the key:
// the layers' ids, which fix their manifests and so their owners, and
// SubIDMaps; other maps, another key), kept in the store beside the layers
// (store.Shifted) and mounted by every such sandbox right above the stack,
// so init chowns nothing the layer carries and nothing is copied up into
// the sandbox's memory-backed writable layer.
//
// A shifted layer is one or more lower dirs. tree holds the owned files,
// symlinks and fifos in directories of the caller's (root inside). The
// owned directories come in dirs/1, dirs/2, ... above it (dirs/1 on top):
// dirs/d holds each owned directory with d-1 owned directories above it,
// as an empty directory of its owner's, under directories of the caller's.
// An overlay shows a directory with the owner and mode of the topmost
// lower dir that has it, and the caller, who can remove an empty directory
// of anyone's from a directory of its own but nothing from a directory of
// a subordinate id, can so still remove every shifted layer (GC, rm -rf
// of the cache). Directories nested deeper than maxDirLayers owned ones
// are left to init, which chowns them in the overlay (an inode each).
//
// Shifted layers chain: a sandbox on a stack whose bottom part has one
// (a fork or rollback on a snapshot of an image sandbox, a task's layers
// on an image) gets one more for the layers above that part, made once
// and used by every sandbox on the same stack. It holds only the owned
// paths those layers list (and the directories above them, which they
// list too), so a snapshot's files cost one copy, not one per fork; what
// the layers above delete or hide hides the copies below as it hides the
// layers' own files. A stack whose upper layers list no owned path gets
// an empty one, which is not mounted but ends the search.
//
// A stack with no shifted layer yet, whose bottom part the sandbox says is
// an image's own (sandbox.Config.ImageLayers: other stacks share it), gets
// two: one of the image's layers, which every stack on the image then
// shares, and one chained on it for the layers above. The key does not
// name that split (another sandbox's ImageLayers, an image's shifted layer
// made meanwhile, change it), so a tree another builder made under the
// key may hold other paths than planned: a sandbox mounts, and leaves to
// init, what the trees' owners.json say, never its own plan.

// shiftVersion is in every key: a change in what a shifted tree holds
// (the rule of rootfs.Owners, the copy, the layout) takes a new version
// (store.ShiftedVersion, whose GC then removes the old ones).
const shiftVersion = store.ShiftedVersion

// maxDirLayers bounds the directory layers of one shifted layer, and so
// the lower dirs it adds to a sandbox: an owned directory nested deeper
// than that many owned ones is left to init. What bounds it is the
// overlay's mount options, one page (mount.Overlay checks it), in which
// the sandbox names each lower dir as /proc/self/fd/N of the process that
// mounts it (init, a reset), not by its path: fdLowerBytes each, so 64
// directory layers take 1.3 KiB of it, whatever the store's path. (Named
// by their paths, 12 took as much: the bound was 12 until session 16.)
const maxDirLayers = 64

// fdLowerBytes is what a lower dir takes in the overlay's mount options:
// "/proc/self/fd/N" and its separator, N below 100000.
const fdLowerBytes = len("/proc/self/fd/99999:")

// Shifter is the sandbox.Shifter over st: see above.
func Shifter(st *store.Store) sandbox.Shifter { return ShifterDirs(st, maxDirLayers) }

// ShifterDirs is Shifter with at most maxDirs directory layers to a
// shifted layer: 0 leaves every owned directory to init, as msb did
// before shifted layers carried them (a benchmark compares the two).
func ShifterDirs(st *store.Store, maxDirs int) sandbox.Shifter {
	return func(ctx context.Context, layers []string, image int, owners []sandbox.Owner) ([]string, []sandbox.Owner, error) {
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
		maps += fmt.Sprintf("; dirs %d", maxDirs) // in the key: another bound, other layers
		chain := shiftChain(st, ids, maps)
		base := 0
		if len(chain) > 0 {
			base = chain[len(chain)-1].N
		}
		var all []map[string]*store.Entry // the manifests of every layer, when read
		if base < len(ids) {              // none for the whole stack yet: plan one, or two
			if all, err = manifests(st, ids); err != nil {
				return nil, nil, err
			}
			ends := []int{len(ids)}
			if base < image && image < len(ids) { // the image's own first, which other stacks share
				ends = []int{image, len(ids)}
			}
			at := base
			for _, n := range ends {
				full, err := rootfs.Owners(st, ids[:n])
				if err != nil {
					return nil, nil, err
				}
				sh := segmentOf(full, all, at, n, maxDirs)
				if at == 0 && n < len(ids) && len(sh.Owners) == 0 {
					continue // the image owns nothing: one for the whole stack
				}
				chain, at = append(chain, sh), n
			}
		}
		lowers := func(sh shiftedOwners) []string {
			return sh.lowers(filepath.Join(st.Root(), "shifted", shiftKey(ids[:sh.N], maps)))
		}
		budget := shiftedBudget(layers)
		for len(chain) > 0 && chain[len(chain)-1].N > base && lowerBytes(chain, lowers) > budget {
			chain = chain[:len(chain)-1] // init chowns what a new one would give
		}
		// mount is the sandbox's lower dirs with chain mounted and what init
		// must still chown; ok is false when the chain cannot serve.
		mount := func(chain []shiftedOwners) (out []string, rest []sandbox.Owner, ok bool, err error) {
			if len(chain) == 0 || lowerBytes(chain, lowers) > budget {
				return nil, nil, false, nil
			}
			from := chain[0].N
			above := all[min(from, len(all)):]
			if all == nil {
				if above, err = manifests(st, ids[from:]); err != nil {
					return nil, nil, false, err
				}
			}
			segs := make([]shiftSeg, len(chain))
			for i, sh := range chain {
				segs[i] = shiftSeg{sh: sh, above: above[sh.N-from:]}
			}
			if rest, ok = residue(segs, owners); !ok {
				return nil, nil, false, nil
			}
			out = make([]string, 0, len(layers)+len(chain)*2)
			at := 0
			for _, sh := range chain {
				out = append(out, layers[at:sh.N]...)
				out = append(out, lowers(sh)...)
				at = sh.N
			}
			return append(out, layers[at:]...), rest, true, nil
		}
		out, rest, ok, err := mount(chain)
		if err != nil {
			return nil, nil, err
		} else if !ok {
			return layers, owners, nil
		}
		if top := chain[len(chain)-1]; top.N > base && top.Base == 0 && len(top.Owners) == 0 {
			return layers, owners, nil // nothing to give: no copy spares anything
		}
		built := false
		for _, sh := range chain {
			if sh.N <= base {
				continue // there already
			}
			if err := buildShifted(ctx, st, sh, ids[:sh.N], layers[:sh.N], all[:sh.N], maps); err != nil {
				return nil, nil, err
			}
			built = true
		}
		if built {
			// The store may hold another tree under a key than the one
			// planned here: another builder's, planned on another Base
			// (another sandbox's ImageLayers, an image's shifted layer made
			// in between), which the key does not name. Mount what the
			// trees on disk say they hold, as a sandbox that finds them
			// does: nothing when they do not chain.
			if out, rest, ok, err = mount(shiftChain(st, ids[:chain[len(chain)-1].N], maps)); err != nil {
				return nil, nil, err
			} else if !ok {
				return layers, owners, nil
			}
		}
		return out, rest, nil
	}
}

// shiftedBudget is how many bytes the lower dirs of shifted layers may
// add to the overlay's mount options of a sandbox on layers: the kernel
// takes one page (mount.Overlay checks it), of which the layers' own lower
// dirs and room for the upper and work dirs and the flags take their
// part. Every lower dir is named by a descriptor there (fdLowerBytes). A
// chain that would pass it (snapshots of forks of snapshots, each with its
// directory layers) gets no new shifted layer, and init chowns what that
// one would have given.
func shiftedBudget(layers []string) int {
	return 4095 - 512 - len(layers)*fdLowerBytes
}

// lowerBytes is the length of the lower dirs of chain in mount options.
func lowerBytes(chain []shiftedOwners, lowers func(shiftedOwners) []string) int {
	n := 0
	for _, sh := range chain {
		n += len(lowers(sh)) * fdLowerBytes
	}
	return n
}

// shiftChain is the chain of shifted layers of the longest bottom part of
// ids that has one, bottom first; nil for none.
func shiftChain(st *store.Store, ids []store.LayerID, maps string) []shiftedOwners {
	for n := len(ids); n > 0; n-- {
		sh, err := readShiftedOwners(filepath.Join(st.Root(), "shifted", shiftKey(ids[:n], maps)))
		if err != nil || sh.Base >= n {
			continue
		}
		sh.N = n
		if sh.Base == 0 {
			return []shiftedOwners{sh}
		}
		if below := shiftChain(st, ids[:sh.Base], maps); len(below) > 0 && below[len(below)-1].N == sh.Base {
			return append(below, sh)
		}
	}
	return nil
}

// segmentOf plans the shifted layer of the stack of n layers (manifests
// ms) above the one of its bottom base layers: of the stack's owners
// (full), those the layers from base up list, and which of them are
// directories at which depth (at most maxDirs).
func segmentOf(full []rootfs.Owner, ms []map[string]*store.Entry, base, n, maxDirs int) shiftedOwners {
	sh := shiftedOwners{Base: base, N: n, Owners: []rootfs.Owner{}}
	listed := listedBy(ms[base:n])
	for _, o := range full {
		if base > 0 && !listed[o.Path] {
			continue
		}
		sh.Owners = append(sh.Owners, o)
	}
	dirs := map[string]bool{}
	for _, o := range sh.Owners { // a directory comes before what it holds
		if i := shown(ms[:n], o.Path); i >= 0 && ms[i][o.Path].Type != store.TypeDir {
			continue
		}
		depth := 1
		for d := parentOf(o.Path); d != ""; d = parentOf(d) {
			if dirs[d] {
				depth++
			}
		}
		dirs[o.Path] = true
		sh.Dirs = append(sh.Dirs, o.Path)
		if depth > maxDirs {
			sh.Chowned = append(sh.Chowned, o.Path)
			continue
		}
		sh.DirLayers = max(sh.DirLayers, depth)
	}
	return sh
}

// buildShifted makes the shifted layer sh of the stack ids (layer trees
// layers, manifests ms, nil when not read) in the store, once.
func buildShifted(ctx context.Context, st *store.Store, sh shiftedOwners, ids []store.LayerID, layers []string, ms []map[string]*store.Entry, maps string) error {
	_, err := st.Shifted(ctx, shiftKey(ids, maps), ids, func(ctx context.Context, tree string) error {
		if ms == nil {
			var err error
			if ms, err = manifests(st, ids); err != nil {
				return err
			}
		}
		plan, err := shiftPlan(sh, ms, layers)
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
		for d := 1; d <= sh.DirLayers; d++ {
			p := filepath.Join(filepath.Dir(tree), "dirs", strconv.Itoa(d))
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			plan.Dirs = append(plan.Dirs, p)
		}
		if len(plan.Entries) == 0 {
			return nil
		}
		return sandbox.Shift(ctx, plan)
	})
	return err
}

// lowers are the lower dirs of the shifted layer sh at dir, bottom first.
func (sh shiftedOwners) lowers(dir string) []string {
	var out []string
	if len(sh.Owners) > len(sh.Dirs) {
		out = append(out, filepath.Join(dir, "tree"))
	}
	for d := sh.DirLayers; d >= 1; d-- {
		out = append(out, filepath.Join(dir, "dirs", strconv.Itoa(d)))
	}
	return out
}

// shiftedOwners, beside a shifted layer (shiftedOwnersFile, JSON), say
// what it gives: a sandbox on the same layers reads them instead of the
// layers' manifests.
type shiftedOwners struct {
	// Owners are the owned paths it holds (rootfs.Owners of its stack;
	// above a Base, those its layers above the Base list).
	Owners []rootfs.Owner `json:"owners"`
	// Dirs are those of Owners that are directories, each in the
	// directory layer of its depth (see above) but Chowned.
	Dirs []string `json:"dirs"`
	// Chowned are the directories nested deeper than maxDirLayers owned
	// ones: the layer has them as the caller's, and init chowns them.
	Chowned []string `json:"chowned,omitempty"`
	// DirLayers is how many directory layers (dirs/1 ...) it has.
	DirLayers int `json:"dir_layers"`
	// Base is the number of bottom layers whose shifted layer this one
	// sits on (0: none).
	Base int `json:"base"`
	// N is the number of layers of its stack (not stored: the key says).
	N int `json:"-"`
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

// shiftSeg is a shifted layer of a sandbox's stack and the manifests of
// the layers above it.
type shiftSeg struct {
	sh    shiftedOwners
	above []map[string]*store.Entry
}

// residue is the owners init must still give when the chain of shifted
// layers segs (bottom first) is mounted: of owners, those no shifted
// layer gives with that owner, untouched by the layers above it (a layer
// above lists the path, or a directory above it as something else or
// opaque), and the directories a layer left to init. ok is false when a
// shifted layer would give a path an owner that owners does not ask for:
// then the sandbox gets none.
func residue(segs []shiftSeg, owners []sandbox.Owner) ([]sandbox.Owner, bool) {
	type given struct {
		o       rootfs.Owner
		touched func(string) bool
	}
	gives := map[string][]given{}
	for _, sg := range segs {
		touched := touchedBy(sg.above)
		chowned := make(map[string]bool, len(sg.sh.Chowned))
		for _, d := range sg.sh.Chowned {
			chowned[d] = true
		}
		for _, o := range sg.sh.Owners {
			if !chowned[o.Path] {
				gives[o.Path] = append(gives[o.Path], given{o, touched})
			}
		}
	}
	asked := make(map[string]bool, len(owners))
	var rest []sandbox.Owner
	for _, o := range owners {
		asked[o.Path] = true
		ok := false
		for _, g := range gives[o.Path] {
			if !g.touched(o.Path) && g.o.UID == o.UID && g.o.GID == o.GID {
				ok = true
			}
		}
		if !ok {
			rest = append(rest, o)
		}
	}
	for p, gs := range gives {
		for _, g := range gs {
			if !asked[p] && !g.touched(p) {
				return nil, false
			}
		}
	}
	return rest, true
}

// listedBy are the paths the layers ms list and the directories above
// them.
func listedBy(ms []map[string]*store.Entry) map[string]bool {
	listed := map[string]bool{}
	for _, m := range ms {
		for p := range m {
			listed[p] = true
			for d := parentOf(p); d != "" && !listed[d]; d = parentOf(d) {
				listed[d] = true
			}
		}
	}
	return listed
}

// touchedBy reports whether the layers ms, above a shifted layer, show a
// path otherwise than it does: they list it (or hold something under it),
// or delete, replace or make opaque a directory above it.
func touchedBy(ms []map[string]*store.Entry) func(string) bool {
	listed := listedBy(ms)
	hides := map[string]bool{} // paths whose contents a layer above hides or replaces
	for _, m := range ms {
		for p, e := range m {
			if e.Type != store.TypeDir || e.Opaque {
				hides[p] = true
			}
		}
	}
	return func(p string) bool {
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
}

// parentOf is p's directory ("." for a top-level path, "" for ".").
func parentOf(p string) string {
	if p == "." {
		return ""
	}
	return path.Dir(p)
}

// shiftPlan lists the entries of the shifted layer sh of a stack of
// layers (manifests ms, trees trees): into its tree, the owned paths but
// the directories, and the directories above them ("." first), these the
// caller's; into its directory layer d, each owned directory of depth d
// and the directories above it, these the caller's. Each is copied from
// the tree of the layer whose entry the overlay of layers shows, in path
// order (a directory before what it holds).
func shiftPlan(sh shiftedOwners, ms []map[string]*store.Entry, trees []string) (wire.ShiftPlan, error) {
	var plan wire.ShiftPlan
	dirs := map[string]bool{}
	for _, d := range sh.Dirs {
		dirs[d] = true
	}
	chowned := map[string]bool{}
	for _, d := range sh.Chowned {
		chowned[d] = true
	}
	byLayer := make([]map[string]rootfs.Owner, sh.DirLayers+1)
	for i := range byLayer {
		byLayer[i] = map[string]rootfs.Owner{}
	}
	add := func(layer int, o rootfs.Owner) {
		m := byLayer[layer]
		if len(m) == 0 {
			m["."] = rootfs.Owner{Path: "."}
		}
		for d := parentOf(o.Path); d != ""; d = parentOf(d) {
			if _, ok := m[d]; !ok {
				m[d] = rootfs.Owner{Path: d}
			}
		}
		m[o.Path] = o
	}
	for _, o := range sh.Owners {
		switch {
		case !dirs[o.Path]:
			add(0, o)
		case !chowned[o.Path]:
			depth := 1
			for d := parentOf(o.Path); d != ""; d = parentOf(d) {
				if dirs[d] {
					depth++
				}
			}
			add(depth, o)
		}
	}
	for layer, owners := range byLayer {
		paths := make([]string, 0, len(owners))
		for p := range owners {
			paths = append(paths, p)
		}
		sort.Slice(paths, func(i, j int) bool { return pathLess(paths[i], paths[j]) })
		for _, p := range paths {
			i := shown(ms, p)
			if i < 0 {
				i = topmostHolding(trees, p)
			}
			if i < 0 {
				return plan, fmt.Errorf("shifting owners: no layer shows /%s", p)
			}
			o := owners[p] // the directories above an entry: the caller's
			plan.Entries = append(plan.Entries, wire.ShiftEntry{Path: p, From: trees[i], UID: o.UID, GID: o.GID, Layer: layer})
		}
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
