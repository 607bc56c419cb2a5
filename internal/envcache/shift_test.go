package envcache

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/store"
)

// TestShiftResidue: what init still chowns over a chain of shifted
// layers, and when one does not fit the owners asked for.
func TestShiftResidue(t *testing.T) {
	sh := shiftedOwners{Owners: []rootfs.Owner{{Path: "home/app", UID: 1000, GID: 1000}, {Path: "home/app/a", UID: 1000, GID: 1000},
		{Path: "home/app/d", UID: 1000, GID: 1000}, {Path: "home/app/d/x", UID: 1000, GID: 1000}, {Path: "srv/f", UID: 7, GID: 7}},
		Dirs: []string{"home/app", "home/app/d"}, DirLayers: 2}
	all := []sandbox.Owner{{Path: "home/app", UID: 1000, GID: 1000}, {Path: "home/app/a", UID: 1000, GID: 1000},
		{Path: "home/app/d", UID: 1000, GID: 1000}, {Path: "home/app/d/x", UID: 1000, GID: 1000}, {Path: "srv/f", UID: 7, GID: 7}}
	deep := sh
	deep.Chowned, deep.DirLayers = []string{"home/app/d"}, 1
	layer := func(es ...store.Entry) map[string]*store.Entry {
		m := map[string]*store.Entry{}
		for i := range es {
			m[es[i].Path] = &es[i]
		}
		return m
	}
	snap := []map[string]*store.Entry{layer(store.Entry{Path: "home/app/new", Type: store.TypeFile}, store.Entry{Path: "home/app/a", Type: store.TypeFile})}
	// The snapshot's own shifted layer: what it lists, owned.
	snapSh := shiftedOwners{Owners: []rootfs.Owner{{Path: "home/app", UID: 1000, GID: 1000}, {Path: "home/app/a", UID: 1000, GID: 1000},
		{Path: "home/app/new", UID: 1000, GID: 1000}}, Dirs: []string{"home/app"}, DirLayers: 1, Base: 1}
	withNew := append(slices.Clone(all), sandbox.Owner{Path: "home/app/new", UID: 1000, GID: 1000})
	paths := func(os []sandbox.Owner) []string {
		var out []string
		for _, o := range os {
			out = append(out, o.Path)
		}
		sort.Strings(out)
		return out
	}
	for _, c := range []struct {
		name   string
		owners []sandbox.Owner
		segs   []shiftSeg
		rest   []string
		ok     bool
	}{
		{"the stack alone: nothing, its directories too", all, []shiftSeg{{sh, nil}}, nil, true},
		{"a directory nested too deep", all, []shiftSeg{{deep, nil}}, []string{"home/app/d"}, true},
		{"a snapshot's file and the directories above it", withNew, []shiftSeg{{sh, snap}}, []string{"home/app", "home/app/a", "home/app/new"}, true},
		{"a snapshot with its own shifted layer", withNew, []shiftSeg{{sh, snap}, {snapSh, nil}}, nil, true},
		{"an opaque directory above", all, []shiftSeg{{sh, []map[string]*store.Entry{layer(store.Entry{Path: "home/app/d", Type: store.TypeDir, Opaque: true})}}},
			[]string{"home/app", "home/app/d", "home/app/d/x"}, true},
		{"a deletion above", all[:3], []shiftSeg{{sh, []map[string]*store.Entry{layer(store.Entry{Path: "home/app/d", Type: store.TypeDelete}), layer(store.Entry{Path: "srv", Type: store.TypeDelete})}}},
			[]string{"home/app", "home/app/d"}, true},
		{"another owner asked", append(slices.Clone(all[:4]), sandbox.Owner{Path: "srv/f", UID: 8, GID: 8}), []shiftSeg{{sh, nil}}, []string{"srv/f"}, true},
		{"an owner not asked", all[1:], []shiftSeg{{sh, nil}}, nil, false},
		{"an owner not asked, from the snapshot's layer", all, []shiftSeg{{sh, snap}, {snapSh, nil}}, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rest, ok := residue(c.segs, c.owners)
			if ok != c.ok || !slices.Equal(paths(rest), c.rest) {
				t.Fatalf("residue: %v %v, want %v %v", paths(rest), ok, c.rest, c.ok)
			}
		})
	}
}

// TestShiftDirLayers: each owned directory goes, empty, into the directory
// layer of its depth, under directories of the caller's, and its files
// into the tree; a directory nested deeper than maxDirLayers owned ones is
// left to init; a snapshot's shifted layer holds only what the snapshot
// lists.
func TestShiftDirLayers(t *testing.T) {
	dir, file := store.Entry{Type: store.TypeDir}, store.Entry{Type: store.TypeFile}
	entries := map[string]store.Entry{"home": dir, "home/app": dir, "home/app/d": dir, "home/app/d/x": file, "home/app/e": dir, "srv": dir, "srv/f": file}
	m := map[string]*store.Entry{}
	for p, e := range entries {
		m[p] = &e
		m[p].Path = p
	}
	ms := []map[string]*store.Entry{m}
	full := []rootfs.Owner{{Path: "home/app", UID: 1000, GID: 1000}, {Path: "home/app/d", UID: 1000, GID: 1000},
		{Path: "home/app/d/x", UID: 1000, GID: 1001}, {Path: "home/app/e", UID: 1000, GID: 1000}, {Path: "srv/f", UID: 7, GID: 7}}
	sh := segmentOf(full, ms, 0, 1, maxDirLayers)
	if sh.DirLayers != 2 || !slices.Equal(sh.Dirs, []string{"home/app", "home/app/d", "home/app/e"}) || len(sh.Chowned) != 0 || len(sh.Owners) != 5 {
		t.Fatalf("segment %+v", sh)
	}
	plan, err := shiftPlan(sh, ms, []string{t.TempDir()}) // "." is in no manifest: the tree holds it
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range plan.Entries {
		got = append(got, fmt.Sprintf("%d %s %d:%d", e.Layer, e.Path, e.UID, e.GID))
	}
	want := []string{"0 . 0:0", "0 home 0:0", "0 home/app 0:0", "0 home/app/d 0:0", "0 home/app/d/x 1000:1001", "0 srv 0:0", "0 srv/f 7:7",
		"1 . 0:0", "1 home 0:0", "1 home/app 1000:1000",
		"2 . 0:0", "2 home 0:0", "2 home/app 0:0", "2 home/app/d 1000:1000", "2 home/app/e 1000:1000"}
	if !slices.Equal(got, want) {
		t.Fatalf("plan\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if l := sh.lowers("/s"); !slices.Equal(l, []string{"/s/tree", "/s/dirs/2", "/s/dirs/1"}) {
		t.Errorf("lowers %v", l)
	}

	// A chain of owned directories deeper than maxDirLayers.
	var chain []rootfs.Owner
	p := "a"
	for range maxDirLayers + 2 {
		chain = append(chain, rootfs.Owner{Path: p, UID: 1000, GID: 1000})
		m[p] = &store.Entry{Path: p, Type: store.TypeDir}
		p += "/a"
	}
	sh = segmentOf(chain, ms, 0, 1, maxDirLayers)
	if sh.DirLayers != maxDirLayers || len(sh.Chowned) != 2 || sh.Chowned[0] != strings.Repeat("a/", maxDirLayers)+"a" {
		t.Fatalf("deep chain: %d layers, chowned %v", sh.DirLayers, sh.Chowned)
	}

	// Above a base: what the layers above list (and the directories above).
	snap := map[string]*store.Entry{"home/app/new": {Path: "home/app/new", Type: store.TypeFile}}
	full = append(full, rootfs.Owner{Path: "home/app/new", UID: 1000, GID: 1000})
	sh = segmentOf(full, []map[string]*store.Entry{m, snap}, 1, 2, maxDirLayers)
	var owned []string
	for _, o := range sh.Owners {
		owned = append(owned, o.Path)
	}
	if !slices.Equal(owned, []string{"home/app", "home/app/new"}) || !slices.Equal(sh.Dirs, []string{"home/app"}) || sh.Base != 1 || sh.DirLayers != 1 {
		t.Fatalf("the snapshot's segment: %+v", sh)
	}
}

// TestShiftPlanOrder: the overlay's entry for each path, a directory
// before what it holds.
func TestShiftPlanOrder(t *testing.T) {
	if got := []string{"a/b", "a-b", ".", "a", "a/b/c", "a.b"}; true {
		sort.Slice(got, func(i, j int) bool { return pathLess(got[i], got[j]) })
		if want := []string{".", "a", "a/b", "a/b/c", "a-b", "a.b"}; !slices.Equal(got, want) {
			t.Fatalf("pathLess order %v, want %v", got, want)
		}
	}
	ms := []map[string]*store.Entry{
		{"d": {Path: "d", Type: store.TypeDir}, "d/x": {Path: "d/x", Type: store.TypeFile}, "e/y": {Path: "e/y", Type: store.TypeFile}, "f/z": {Path: "f/z"}},
		{"d/x": {Path: "d/x", Type: store.TypeFile}, "e": {Path: "e", Type: store.TypeDir, Opaque: true}, "f": {Path: "f", Type: store.TypeDelete}},
		{"d": {Path: "d", Type: store.TypeDir}},
	}
	for p, want := range map[string]int{"d": 2, "d/x": 1, "e/y": -1, "f/z": -1, "e": 1, "f": -1, "g": -1} {
		if got := shown(ms, p); got != want {
			t.Errorf("shown(%s) = %d, want %d", p, got, want)
		}
	}
}

// TestShiftKey: other id maps (another /etc/subuid range) or other layers
// name another shifted tree, never the same one.
func TestShiftKey(t *testing.T) {
	a, b := store.LayerID(store.DigestOf([]byte("a"))), store.LayerID(store.DigestOf([]byte("b")))
	const maps = "uid 0 1001 1 1 100000 65536; gid 0 1001 1 1 100000 65536"
	keys := map[string]bool{}
	for _, k := range []string{
		shiftKey([]store.LayerID{a}, maps),
		shiftKey([]store.LayerID{a, b}, maps),
		shiftKey([]store.LayerID{b, a}, maps),
		shiftKey([]store.LayerID{a}, "uid 0 1001 1 1 200000 65536; gid 0 1001 1 1 100000 65536"),
		shiftKey([]store.LayerID{a}, "uid 0 1001 1 1 100000 65536; gid 0 1001 1 1 200000 65536"),
	} {
		if keys[k] {
			t.Fatalf("key %s twice", k)
		}
		keys[k] = true
	}
	if shiftKey([]store.LayerID{a, b}, maps) != shiftKey([]store.LayerID{a, b}, maps) {
		t.Fatal("one stack, two keys")
	}
}

// TestShiftLowerBytes: a sandbox's shifted layers fit the overlay's mount
// options beside its own layers: on a stack of 8 layers, one with every
// directory layer does, a chain of three such (snapshots of forks of
// snapshots) does not, and the Shifter then makes no new one. The
// store's path does not count: the overlay names every lower dir by a
// descriptor (fdLowerBytes each).
func TestShiftLowerBytes(t *testing.T) {
	root := "/home/someone-with-a-long-name/" + strings.Repeat("long/", 40) + ".cache/msb/store" // 250 bytes
	var layers []string
	for range 8 {
		layers = append(layers, filepath.Join(root, "layers", strings.Repeat("0", 64), "tree"))
	}
	sh := shiftedOwners{Owners: []rootfs.Owner{{Path: "f"}, {Path: "d"}}, Dirs: []string{"d"}, DirLayers: maxDirLayers}
	lowers := func(sh shiftedOwners) []string {
		return sh.lowers(filepath.Join(root, "shifted", strings.Repeat("0", 64)))
	}
	budget := shiftedBudget(layers)
	if n := lowerBytes([]shiftedOwners{sh}, lowers); n > budget {
		t.Fatalf("one shifted layer with %d directory layers: %d bytes of lower dirs, want at most %d", maxDirLayers, n, budget)
	}
	if n := lowerBytes([]shiftedOwners{sh, sh, sh}, lowers); n <= budget {
		t.Fatalf("three: %d bytes, want more than %d", n, budget)
	}
}

// TestShifterOnDisk: a sandbox mounts the shifted layers as the store
// holds them, and leaves to init what they do not give, whatever it
// planned. The key of a shifted layer names its stack, not the Base it
// sits on: here the stack's is on the image's (made by a sandbox that
// said where the image's layers end), that one is gone, and a sandbox that
// says nothing of the image's layers plans one of the whole stack, finds
// the other builder's tree under the key and must not take it for its
// plan (it mounted it and left the image's owned files to no one).
func TestShifterOnDisk(t *testing.T) {
	if os.Geteuid() == 0 {
		privtest.Unprivileged(t, "^TestShifterOnDisk$")
		return
	}
	ctx := context.Background()
	st, err := store.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	entry := func(p string, typ store.EntryType, id uint32) store.Entry {
		return store.Entry{Path: p, Type: typ, Mode: 0o755, UID: id, GID: id}
	}
	commit := func(parents []store.LayerID, es ...store.Entry) store.LayerID {
		w, err := st.NewLayerWriter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		for i := range es {
			if es[i].Type == store.TypeFile {
				es[i].Size = int64(len(es[i].Path))
				if err := w.AddFile(ctx, &es[i], strings.NewReader(es[i].Path)); err != nil {
					t.Fatal(err)
				}
			}
		}
		id, err := w.Commit(ctx, &store.Manifest{Version: store.ManifestVersion, Parents: parents, Entries: es})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	dir, file := store.TypeDir, store.TypeFile
	img := commit(nil, entry(".", dir, 0), entry("home", dir, 0), entry("home/app", dir, 1000), entry("home/app/f", file, 1000),
		entry("srv", dir, 0), entry("srv/x", file, 7))
	task := commit([]store.LayerID{img}, entry(".", dir, 0), entry("home", dir, 0), entry("home/app", dir, 1000), entry("home/app/new", file, 1000))
	ids := []store.LayerID{img, task}
	layers := []string{st.TreePath(img), st.TreePath(task)}
	full, err := rootfs.Owners(st, ids)
	if err != nil {
		t.Fatal(err)
	}
	var owners []sandbox.Owner
	for _, o := range full {
		owners = append(owners, sandbox.Owner{Path: o.Path, UID: o.UID, GID: o.GID})
	}
	if len(owners) != 4 {
		t.Fatalf("owners %v, want home/app, its f and new, srv/x", owners)
	}
	shifted := filepath.Join(st.Root(), "shifted")
	// check: init chowns every owner but those the topmost lower dir
	// holding the path gives, a shifted layer's copy owned by a
	// subordinate id.
	check := func(what string, out []string, rest []sandbox.Owner) {
		t.Helper()
		left := map[string]bool{}
		for _, o := range rest {
			left[o.Path] = true
		}
		for _, l := range out {
			if _, err := os.Stat(l); err != nil {
				t.Fatalf("%s: lower dir %v", what, err)
			}
		}
		for _, o := range owners {
			if left[o.Path] {
				continue
			}
			var fi os.FileInfo
			var from string
			for i := len(out) - 1; i >= 0 && fi == nil; i-- {
				fi, from = nil, out[i]
				fi, _ = os.Lstat(filepath.Join(out[i], o.Path))
			}
			if fi == nil || !strings.HasPrefix(from, shifted+"/") || int(fi.Sys().(*syscall.Stat_t).Uid) == os.Getuid() {
				t.Errorf("%s: /%s is left to no one: init does not chown it and the overlay shows it from %s, not a shifted copy", what, o.Path, from)
			}
		}
	}
	shift := Shifter(st)
	out, rest, err := shift(ctx, layers, 1, owners) // the image's, and one above it
	if err != nil {
		t.Fatal(err)
	}
	check("the image's layer apart", out, rest)
	if len(rest) != 0 {
		t.Fatalf("the image's layer apart: init chowns %v, want nothing", rest)
	}
	ents, err := os.ReadDir(shifted)
	if err != nil || len(ents) != 2 {
		t.Fatalf("shifted layers %v %v, want the image's and the stack's", ents, err)
	}
	for _, e := range ents {
		sh, err := readShiftedOwners(filepath.Join(shifted, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if sh.Base == 0 {
			if err := os.RemoveAll(filepath.Join(shifted, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	out, rest, err = shift(ctx, layers, 0, owners) // plans one of the whole stack
	if err != nil {
		t.Fatal(err)
	}
	check("another builder's tree under the key", out, rest)
	out, rest, err = shift(ctx, layers, 1, owners) // makes the image's again
	if err != nil {
		t.Fatal(err)
	}
	check("the image's layer made again", out, rest)
	if len(rest) != 0 {
		t.Fatalf("the image's layer made again: init chowns %v, want nothing", rest)
	}
}
