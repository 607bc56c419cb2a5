package envcache

import (
	"slices"
	"sort"
	"testing"

	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/store"
)

// TestShiftResidue: what init still chowns over a shifted tree, and when
// the tree does not fit the owners asked for.
func TestShiftResidue(t *testing.T) {
	sh := shiftedOwners{Owners: []rootfs.Owner{{Path: "home/app", UID: 1000, GID: 1000}, {Path: "home/app/a", UID: 1000, GID: 1000},
		{Path: "home/app/d", UID: 1000, GID: 1000}, {Path: "home/app/d/x", UID: 1000, GID: 1000}, {Path: "srv/f", UID: 7, GID: 7}},
		Dirs: []string{"home/app", "home/app/d"}}
	all := []sandbox.Owner{{Path: "home/app", UID: 1000, GID: 1000}, {Path: "home/app/a", UID: 1000, GID: 1000},
		{Path: "home/app/d", UID: 1000, GID: 1000}, {Path: "home/app/d/x", UID: 1000, GID: 1000}, {Path: "srv/f", UID: 7, GID: 7}}
	layer := func(es ...store.Entry) map[string]*store.Entry {
		m := map[string]*store.Entry{}
		for i := range es {
			m[es[i].Path] = &es[i]
		}
		return m
	}
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
		above  []map[string]*store.Entry
		rest   []string
		ok     bool
	}{
		{"the stack alone: its directories", all, nil, []string{"home/app", "home/app/d"}, true},
		{"a snapshot's file and the directories above it", append(slices.Clone(all), sandbox.Owner{Path: "home/app/new", UID: 1000, GID: 1000}),
			[]map[string]*store.Entry{layer(store.Entry{Path: "home/app/new", Type: store.TypeFile}, store.Entry{Path: "home/app/a", Type: store.TypeFile})},
			[]string{"home/app", "home/app/a", "home/app/d", "home/app/new"}, true},
		{"an opaque directory above", all, []map[string]*store.Entry{layer(store.Entry{Path: "home/app/d", Type: store.TypeDir, Opaque: true})},
			[]string{"home/app", "home/app/d", "home/app/d/x"}, true},
		{"a deletion above", all[:3], []map[string]*store.Entry{layer(store.Entry{Path: "home/app/d", Type: store.TypeDelete}), layer(store.Entry{Path: "srv", Type: store.TypeDelete})},
			[]string{"home/app", "home/app/d"}, true},
		{"another owner asked", append(slices.Clone(all[:4]), sandbox.Owner{Path: "srv/f", UID: 8, GID: 8}), nil, []string{"home/app", "home/app/d", "srv/f"}, true},
		{"an owner not asked", all[1:], nil, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rest, ok := residue(sh, c.owners, c.above)
			if ok != c.ok || !slices.Equal(paths(rest), c.rest) {
				t.Fatalf("residue: %v %v, want %v %v", paths(rest), ok, c.rest, c.ok)
			}
		})
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
