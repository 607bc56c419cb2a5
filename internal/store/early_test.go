package store

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// earlyNodes: new content held and in temp files, content the store has
// (old), and one content under two modes (the second a copy).
var earlyNodes = map[string]node{
	"old":       {content: "in the store before"},
	"held":      {content: "held in memory"},
	"big":       {content: strings.Repeat("b", 2<<20)},
	"d/same":    {content: "same content", mode: 0o644},
	"d/same-x":  {content: "same content", mode: 0o755},
	"d/e/empty": {content: ""},
	"link":      {symlink: "held"},
}

// TestPublishEarly: the trees PublishLeasedEarly hands out are complete
// before any barrier and before anything of the layer is visible, also
// for a layer not hashed yet (which Hashed names after the trees, before
// any barrier); Place comes after the barriers, before the rename; what
// was opened (or mounted) of an early tree is the layer's tree once
// published, also when another commit put the same layer in place first
// (then the early tree stays in the layer's dir, and goes with it).
func TestPublishEarly(t *testing.T) {
	for _, c := range []struct{ race, hashLater, copyNow bool }{{false, false, false}, {true, false, false},
		{false, true, false}, {true, true, false}, {false, true, true}, {true, true, true}} {
		race := c.race
		t.Run(fmt.Sprintf("lost-race-%v/hashed-after-trees-%v/copied-%v", race, c.hashLater, c.copyNow), func(t *testing.T) {
			s := newStore(t)
			src := filepath.Join(t.TempDir(), "src")
			writeTree(t, src, earlyNodes)
			if _, err := s.CommitDir(t.Context(), src, CommitOptions{}); err != nil { // "old" in the store
				t.Fatal(err)
			}
			writeTree(t, src, map[string]node{"held": {content: "held, changed"}, "big": {content: strings.Repeat("c", 2<<20)},
				"d/same": {content: "new same", mode: 0o644}, "d/same-x": {content: "new same", mode: 0o755}})
			var data *Staged
			if c.hashLater {
				var err error
				if data, err = s.StageDir(t.Context(), src, CommitOptions{MapOwner: rootOwner, HoldBytes: 1 << 20, HashLater: true, CopyNow: c.copyNow}); err != nil {
					t.Fatal(err)
				}
			} else {
				var record *Staged
				data, record = laterStage(t, s, src, 1<<20)
				record.Discard()
			}
			id := data.ID
			flushes := 0
			s.hooks.flush = func([]string, bool) { flushes++ }
			var fd int = -1
			var tree string
			placed, treesCame, hashed := false, false, false
			lease, err := s.PublishLeasedEarly(t.Context(), "", Early{
				Trees: func(trees []string) {
					treesCame = true
					tree = trees[0]
					if c.hashLater && (data.ID != LayerID{} || hashed) {
						t.Errorf("the layer was hashed (%s) before its tree came", data.ID.Short())
					}
					// Copied while staged, or held in memory (and written
					// out for the tree) until hashed.
					if held := slices.ContainsFunc(data.pending, func(p pendingObject) bool { return p.held != nil }); c.hashLater && held == c.copyNow {
						t.Errorf("copied %v, content held in memory %v", c.copyNow, held)
					}
					if flushes != 0 || s.Has(id) || tree == s.TreePath(id) {
						t.Errorf("early tree %s after %d barriers, layer present %v", tree, flushes, s.Has(id))
					}
					if _, err := s.Manifest(id); err == nil {
						t.Error("the layer's manifest is there before the barriers")
					}
					checkTree(t, tree, src)
					var err error
					if fd, err = unix.Open(tree, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
						t.Fatal(err)
					}
				},
				Hashed: func() {
					hashed = true
					if !treesCame || flushes != 0 || (data.ID == LayerID{}) || s.Has(data.ID) {
						t.Errorf("hashed (%s): trees came %v, after %d barriers", data.ID.Short(), treesCame, flushes)
					}
					if c.hashLater {
						id = data.ID
						// "old" was in the store, and d/same-x's content
						// is d/same's: neither is new content.
						if n := len(data.Created()); n != 3 {
							t.Errorf("the layer brings %d new contents, want 3 (held, big, new same)", n)
						}
					} else if data.ID != id {
						t.Errorf("hashed as %s, staged as %s", data.ID.Short(), id.Short())
					}
				},
				Place: func() {
					placed = true
					if flushes < 2 || s.Has(id) {
						t.Errorf("place after %d barriers, layer present %v", flushes, s.Has(id))
					}
					if race { // another commit of the layer puts its tree in place
						if _, err := s.Materialize(t.Context(), id); err != nil {
							t.Fatal(err)
						}
					}
				},
			}, data)
			s.hooks.flush = nil
			if err != nil {
				t.Fatal(err)
			}
			defer lease.Release()
			defer unix.Close(fd)
			if !placed || !hashed || !s.Has(id) {
				t.Fatalf("published: place called %v, hashed %v, layer present %v", placed, hashed, s.Has(id))
			}
			if _, err := os.Lstat(tree); !os.IsNotExist(err) {
				t.Fatalf("the early tree's temp path is still there: %v", err)
			}
			held := fmt.Sprintf("/proc/self/fd/%d", fd)
			checkTree(t, held, src)
			var a, b unix.Stat_t
			if err := unix.Stat(held, &a); err != nil {
				t.Fatal(err)
			}
			if err := unix.Stat(s.TreePath(id), &b); err != nil {
				t.Fatal(err)
			}
			if (a.Ino == b.Ino) == race {
				t.Fatalf("lost race %v: the early tree is the layer's tree: %v", race, a.Ino == b.Ino)
			}
			checkTree(t, s.TreePath(id), src)
			if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
				t.Fatalf("verify: %v %v", err, r.Problems)
			}
			if _, err := s.GC(t.Context()); err != nil {
				t.Fatal(err)
			}
			checkTree(t, held, src) // leased: kept
			lease.Release()
			if _, err := s.GC(t.Context()); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(s.layerDir(id)); !os.IsNotExist(err) {
				t.Fatalf("the layer's dir (its early tree too) outlived its lease: %v", err)
			}
		})
	}
}

// checkTree checks that tree holds src's files with their content and
// mode.
func checkTree(t *testing.T, tree, src string) {
	t.Helper()
	for p := range earlyNodes {
		want, err := os.Lstat(filepath.Join(src, p))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.Lstat(filepath.Join(tree, p))
		if err != nil {
			t.Fatalf("tree %s: %v", tree, err)
		}
		if got.Mode() != want.Mode() {
			t.Errorf("%s: mode %v, want %v", p, got.Mode(), want.Mode())
		}
		if want.Mode().IsRegular() {
			w, _ := os.ReadFile(filepath.Join(src, p))
			g, _ := os.ReadFile(filepath.Join(tree, p))
			if string(g) != string(w) {
				t.Errorf("%s: %d bytes differ from the source's %d", p, len(g), len(w))
			}
		}
	}
}

const killedEarlyEnv = "MSB_STORE_KILLED_EARLY_HELPER"

// TestEarlyKilled: a PublishLeasedEarly killed before each barrier (k 4:
// after the trees were handed out and placed) leaves a store that
// verify passes, before and after gc, with the layer whole or absent.
func TestEarlyKilled(t *testing.T) {
	for k := 1; k <= 4; k++ {
		t.Run(fmt.Sprintf("killed-before-barrier-%d", k), func(t *testing.T) {
			s := killedAtBarrier(t, earlyNodes, "TestKilledEarlyHelper", killedEarlyEnv, k, "", "a publication")
			if ents, _ := os.ReadDir(s.path("layers")); len(ents) != 0 {
				t.Fatalf("gc left layers/ with %d entries (an unnamed layer is garbage)", len(ents))
			}
		})
	}
}

// TestKilledEarlyHelper publishes a directory with PublishLeasedEarly
// and kills itself before barrier k (k 3: at Place; 4: after all), for
// TestEarlyKilled.
func TestKilledEarlyHelper(t *testing.T) {
	s, f, k, kill := killedHelperStore(t, killedEarlyEnv, "TestEarlyKilled")
	data, record := laterStage(t, s, f[1], 1<<20)
	record.Discard()
	_, err := s.PublishLeasedEarly(t.Context(), "", Early{Trees: func([]string) {}, Place: func() {
		if k == 3 {
			kill()
		}
	}}, data)
	kill()
	t.Fatalf("not killed before barrier %d: %v", k, err)
}

// TestWriteOutNoWriteback: with CommitOptions.NoWriteback, WriteOut
// writes the held content to temp files without starting their
// writeback (sync_file_range, which blocks on a busy disk's full queue),
// and the publication's content barrier fsyncs every one of them.
func TestWriteOutNoWriteback(t *testing.T) {
	for _, noWriteback := range []bool{false, true} {
		t.Run(fmt.Sprintf("no-writeback-%v", noWriteback), func(t *testing.T) {
			s := newStore(t)
			src := filepath.Join(t.TempDir(), "src")
			writeTree(t, src, earlyNodes)
			data, err := s.StageDir(t.Context(), src, CommitOptions{HoldBytes: 1 << 20, HashLater: true, NoWriteback: noWriteback})
			if err != nil {
				t.Fatal(err)
			}
			if err := data.WriteOut(t.Context()); err != nil {
				data.Discard()
				t.Fatal(err)
			}
			var tmps []string
			for _, p := range data.pending {
				if p.tmp == "" || p.writing == noWriteback {
					t.Errorf("pending %s: temp file %q, writeback started %v", p.digest, p.tmp, p.writing)
				}
				tmps = append(tmps, p.tmp)
			}
			if len(tmps) < 4 {
				t.Fatalf("%d new objects staged, want the tree's 4 or more", len(tmps))
			}
			var first []string
			s.hooks.flush = func(paths []string, whole bool) {
				if first == nil {
					first = append([]string{}, paths...)
					if whole {
						first = append(first, "<syncfs>")
					}
				}
			}
			if err := s.Publish(t.Context(), "", data); err != nil {
				t.Fatal(err)
			}
			for _, tmp := range tmps {
				if !slices.Contains(first, tmp) && !slices.Contains(first, "<syncfs>") {
					t.Errorf("the content barrier did not flush %s: %v", tmp, first)
				}
			}
		})
	}
}
