package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// coldLayers commits a base and an env over it, with content they share,
// content each has alone, a large compressible file, modes and a symlink,
// and returns them with the view of each tree.
func coldLayers(t *testing.T, s *Store) (base, env LayerID, views map[LayerID]map[string]string) {
	t.Helper()
	big := strings.Repeat("def f(x):\n    return x + 1\n", 20000)
	base = commitNodes(t, s, map[string]node{
		"usr/lib/big.py": {content: big},
		"usr/bin/tool":   {content: "#!/bin/sh\n" + strings.Repeat("echo tool\n", 1000), mode: 0o4755},
		"usr/bin/sh":     {symlink: "tool"},
		"shared":         {content: strings.Repeat("shared by both\n", 1000)},
		"base-only":      {content: strings.Repeat("only the base\n", 1000)},
		"empty":          {content: ""},
		"tiny":           {content: "one block, compressed or not"},
	}, CommitOptions{Ref: "base/b"})
	env = commitNodes(t, s, map[string]node{
		"venv/lib/mod.py": {content: "import os\n" + big[:5000]},
		"venv/shared":     {content: strings.Repeat("shared by both\n", 1000), mode: 0o600}, // same object, another inode
		"env-only":        {content: strings.Repeat("only the env\n", 1000)},
	}, CommitOptions{Parents: []LayerID{base}, Ref: "env/e"})
	views = map[LayerID]map[string]string{base: view(t, s.TreePath(base)), env: view(t, s.TreePath(env))}
	return base, env, views
}

func compact(t *testing.T, s *Store, opts CompactOptions) CompactReport {
	t.Helper()
	r, err := s.Compact(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func verifyOK(t *testing.T, s *Store) Report {
	t.Helper()
	r, err := s.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("verify: %v", r.Problems)
	}
	return r
}

// TestCompactRoundTrip compacts every layer, checks what is on disk,
// exports and imports the cold store, and thaws the layers through a
// lease: the trees are as they were. TestCompactRootless reruns it as an
// unprivileged user.
func TestCompactRoundTrip(t *testing.T) {
	s := newStore(t)
	base, env, views := coldLayers(t, s)
	before, err := s.Usage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r := compact(t, s, CompactOptions{})
	if !slices.Equal(r.Layers, sortedIDs(base, env)) || r.Objects != 6 || r.KeptRaw != 2 || r.Skipped != 0 || r.Leased != 0 {
		t.Fatalf("compact report %+v: want both layers, 6 objects compressed, the empty and the tiny one kept raw", r)
	}
	for _, id := range []LayerID{base, env} {
		if !s.Has(id) || !s.Compacted(id) || s.materialized(id) {
			t.Fatalf("layer %s: has %v compacted %v materialized %v, want a cold layer", id.Short(), s.Has(id), s.Compacted(id), s.materialized(id))
		}
	}
	big := DigestOf([]byte(strings.Repeat("def f(x):\n    return x + 1\n", 20000)))
	if s.HasRawObject(big) || !s.hasCompressed(big) || !s.HasObject(big) {
		t.Fatal("the big object is not held compressed only")
	}
	if n := countFiles(t, s.path("inodes")); n != 2 {
		t.Errorf("%d inodes left after compacting everything, want the 2 kept raw", n)
	}
	if !s.HasRawObject(DigestOf([]byte("one block, compressed or not"))) {
		t.Error("a one-block object was compressed")
	}
	if b, _ := os.ReadFile(s.path("VERSION")); string(b) != versionLine2 {
		t.Errorf("VERSION %q after compact, want %q", b, versionLine2)
	}
	after, err := s.Usage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if after.Compacted != 2 || after.Compressed != 6 || after.DiskBytes >= before.DiskBytes {
		t.Errorf("usage after compact: %d compacted, %d compressed, %d bytes (before %d)", after.Compacted, after.Compressed, after.DiskBytes, before.DiskBytes)
	}
	if v := verifyOK(t, s); v.Objects != 8 {
		t.Errorf("verify checked %d objects, want the 6 compressed and the 2 raw", v.Objects)
	}
	// Reopened (VERSION 2), exported cold, imported elsewhere.
	s, err = Open(s.Root())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.Export(t.Context(), &buf, ExportOptions{Refs: []string{"env/e"}}); err != nil {
		t.Fatal(err)
	}
	dst := newStore(t)
	if _, err := dst.Import(t.Context(), &buf); err != nil {
		t.Fatal(err)
	}
	for id, v := range views {
		diffViews(t, v, view(t, dst.TreePath(id)))
	}
	// GC keeps what refs reach, compressed.
	if g, err := s.GC(t.Context()); err != nil || g.Objects != 0 || len(g.Layers) != 0 {
		t.Fatalf("gc of a cold store: %+v %v", g, err)
	}
	// Thawed by a lease: the trees as they were, the objects raw again.
	l, err := s.Lease(t.Context(), env)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	for id, v := range views {
		if s.Compacted(id) {
			t.Fatalf("layer %s still cold after a lease", id.Short())
		}
		diffViews(t, v, view(t, s.TreePath(id)))
	}
	if !s.HasRawObject(big) || s.hasCompressed(big) {
		t.Error("a thawed object is not raw only")
	}
	verifyOK(t, s)
	// Compacted again: the leased layers stay.
	if r := compact(t, s, CompactOptions{}); len(r.Layers) != 0 || r.Leased != 2 || r.Objects != 0 {
		t.Errorf("compact with a lease on both layers: %+v", r)
	}
}

func sortedIDs(ids ...LayerID) []LayerID {
	slices.SortFunc(ids, func(a, b LayerID) int { return strings.Compare(a.String(), b.String()) })
	return ids
}

// TestCompactLeased: a leased layer keeps its tree and every object it
// links, whatever it shares with a layer compacted beside it.
func TestCompactLeased(t *testing.T) {
	s := newStore(t)
	shared, aOnly, bOnly := strings.Repeat("shared\n", 2000), strings.Repeat("a only\n", 2000), strings.Repeat("b only\n", 2000)
	a := commitNodes(t, s, map[string]node{"shared": {content: shared}, "a": {content: aOnly}}, CommitOptions{Ref: "a"})
	b := commitNodes(t, s, map[string]node{"shared": {content: shared}, "b": {content: bOnly}}, CommitOptions{Ref: "b"})
	va := view(t, s.TreePath(a))
	l, err := s.Lease(t.Context(), a)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	r := compact(t, s, CompactOptions{UnusedFor: -1, Layers: []LayerID{a, b}})
	if !slices.Equal(r.Layers, []LayerID{b}) || r.Leased != 1 || r.Objects != 1 {
		t.Fatalf("compact report %+v: want b only, 1 leased, 1 object", r)
	}
	if s.Compacted(a) || !s.Compacted(b) {
		t.Fatal("the leased layer was compacted, or the other not")
	}
	diffViews(t, va, view(t, s.TreePath(a)))
	if !s.HasRawObject(DigestOf([]byte(shared))) || s.HasRawObject(DigestOf([]byte(bOnly))) {
		t.Error("the shared object was compressed, or b's own was not")
	}
	verifyOK(t, s)
	// By age: nothing is old.
	if r := compact(t, s, CompactOptions{UnusedFor: 3600e9}); len(r.Layers) != 0 {
		t.Errorf("compact by age took fresh layers: %+v", r)
	}
}

// TestCompactCorruption: a damaged compressed object is reported by
// Verify with the layers that use it, and its layer's thaw fails rather
// than build a tree with other bytes.
func TestCompactCorruption(t *testing.T) {
	for _, how := range []string{"flipped", "other-content"} {
		t.Run(how, func(t *testing.T) {
			s := newStore(t)
			id := commitNodes(t, s, map[string]node{"f": {content: strings.Repeat("payload ", 1000)}}, CommitOptions{Ref: "x"})
			compact(t, s, CompactOptions{})
			d := DigestOf([]byte(strings.Repeat("payload ", 1000)))
			p := s.compressedPath(d)
			z, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if how == "flipped" {
				z[len(z)/2] ^= 0x40
			} else {
				enc, _ := zstd.NewWriter(nil)
				z = enc.EncodeAll([]byte(strings.Repeat("pAyload ", 1000)), nil)
			}
			os.Chmod(p, 0o644)
			if err := os.WriteFile(p, z, 0o444); err != nil {
				t.Fatal(err)
			}
			r, err := s.Verify(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Problems) != 1 || r.Problems[0].Kind != CorruptObject || r.Problems[0].Digest != d ||
				!slices.Equal(r.Problems[0].Layers, []LayerID{id}) || !strings.HasPrefix(r.Problems[0].Path, "objects/zstd/") {
				t.Fatalf("verify found %v, want the corrupt compressed object used by %s", r.Problems, id.Short())
			}
			_, err = s.Materialize(t.Context(), id)
			if err == nil || s.materialized(id) {
				t.Fatalf("thaw of a corrupt object: %v", err)
			}
			if how == "other-content" && !errors.Is(err, ErrDigestMismatch) {
				t.Errorf("thaw error %v, want ErrDigestMismatch", err)
			}
			if _, err := s.OpenObject(d); err == nil {
				t.Error("OpenObject of a corrupt compressed object succeeded")
			}
		})
	}
}

// TestCompactCrash stops Compact at each stage, as a crash would, and
// checks that the store opens, verifies, and gives every layer as it was;
// then that a second Compact finishes the work.
func TestCompactCrash(t *testing.T) {
	crash := errors.New("crash")
	for _, stage := range []string{"start", "tree", "objects"} {
		t.Run(stage, func(t *testing.T) {
			s := newStore(t)
			base, env, views := coldLayers(t, s)
			s.hooks.compact = func(at string) error {
				if at == stage {
					return crash
				}
				return nil
			}
			if _, err := s.Compact(t.Context(), CompactOptions{}); !errors.Is(err, crash) {
				t.Fatalf("compact: %v, want the crash at %s", err, stage)
			}
			s, err := Open(s.Root())
			if err != nil {
				t.Fatal(err)
			}
			verifyOK(t, s)
			for _, id := range []LayerID{base, env} {
				if !s.Has(id) {
					t.Fatalf("layer %s missing after a crash at %s", id.Short(), stage)
				}
			}
			r := compact(t, s, CompactOptions{})
			if s.Compacted(base) != true || s.Compacted(env) != true || r.Skipped != 0 {
				t.Fatalf("second compact %+v left a layer warm", r)
			}
			if n := countFiles(t, s.path("objects", "sha256")); n != 2 {
				t.Errorf("%d raw objects after the second compact, want the 2 kept raw", n)
			}
			verifyOK(t, s)
			sameViews(t, s, views)
		})
	}
}

// TestCompactCancelled cancels a background Compact (a daemon's, whose
// shutdown cancels it) at each stage and checks that it stops there,
// leaves no temp file, and leaves a store that verifies and gives every
// layer as it was; then that a second Compact finishes the work.
func TestCompactCancelled(t *testing.T) {
	for _, stage := range []string{"start", "tree", "objects"} {
		t.Run(stage, func(t *testing.T) {
			s := newStore(t)
			base, env, views := coldLayers(t, s)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			s.hooks.compact = func(at string) error {
				if at == stage {
					cancel()
				}
				return nil
			}
			r, err := s.Compact(ctx, CompactOptions{Background: true})
			if !errors.Is(err, context.Canceled) && (stage != "objects" || err != nil) {
				t.Fatalf("compact cancelled at %s: %+v %v", stage, r, err)
			}
			s.hooks.compact = nil
			if n := countFiles(t, s.path("tmp")); n != 0 {
				t.Errorf("%d temp files left by the cancelled compaction", n)
			}
			verifyOK(t, s)
			r = compact(t, s, CompactOptions{Background: true})
			if !s.Compacted(base) || !s.Compacted(env) || r.Skipped != 0 {
				t.Fatalf("second compact %+v left a layer warm", r)
			}
			verifyOK(t, s)
			sameViews(t, s, views)
		})
	}
}

// sameViews checks that each layer of views materializes as it was and
// that the store then verifies.
func sameViews(t *testing.T, s *Store, views map[LayerID]map[string]string) {
	t.Helper()
	for id, v := range views {
		p, err := s.Materialize(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		diffViews(t, v, view(t, p))
	}
	verifyOK(t, s)
}

const compactRootlessEnv = "MSB_STORE_COMPACT_ROOTLESS"

// TestCompactRootless reruns TestCompactRoundTrip, TestCompactCrash,
// TestCompactCancelled, TestCompactLeased and TestCompactEarlyTree as uid 65534, root of its own
// user namespace, as a rootless sandbox's store is used.
func TestCompactRootless(t *testing.T) {
	if os.Getenv(compactRootlessEnv) != "" {
		t.Skip("in the rootless child")
	}
	requireRoot(t)
	dir, bin := nobodysTestBinary(t, "msb-compact-")
	tests := []string{"RoundTrip", "Crash", "Cancelled", "Leased", "EarlyTree"}
	cmd := exec.Command(bin, "-test.run=^TestCompact("+strings.Join(tests, "|")+")$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), compactRootlessEnv+"=1", "TMPDIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 65534, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 65534, Size: 1}},
		Credential:  &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
	}
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "--- SKIP") {
		t.Fatalf("rootless run: %v\n%s", err, out)
	}
	for _, name := range tests {
		if !strings.Contains(string(out), "--- PASS: TestCompact"+name+" ") {
			t.Errorf("rootless run: TestCompact%s did not pass:\n%s", name, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "store.test")); err != nil {
		t.Fatal(err)
	}
}

// TestCompactUnreadable: a file of mode 0000 is compressed where the
// store's user can read it (root, or root of a user namespace owning it)
// and left raw where it cannot; its layer is cold and thaws either way.
func TestCompactUnreadable(t *testing.T) {
	s := newStore(t)
	id := commitNodes(t, s, map[string]node{"secret": {content: "no one reads this", mode: 0o000}, "open": {content: "anyone"}}, CommitOptions{})
	v := view(t, s.TreePath(id))
	r := compact(t, s, CompactOptions{})
	if len(r.Layers) != 1 || r.Objects+r.Skipped+r.KeptRaw != 2 {
		t.Fatalf("compact report %+v", r)
	}
	verifyOK(t, s)
	p, err := s.Materialize(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	diffViews(t, v, view(t, p))
}

// TestCompactGC: GC removes a cold layer no ref keeps with its compressed
// objects, and keeps a referenced one's.
func TestCompactGC(t *testing.T) {
	s := newStore(t)
	keptData, garbage := strings.Repeat("kept\n", 2000), strings.Repeat("garbage\n", 2000)
	kept := commitNodes(t, s, map[string]node{"k": {content: keptData}}, CommitOptions{Ref: "kept"})
	gone := commitNodes(t, s, map[string]node{"g": {content: garbage}}, CommitOptions{})
	compact(t, s, CompactOptions{})
	g, err := s.GC(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.Layers, []LayerID{gone}) || g.Objects != 1 || s.HasObject(DigestOf([]byte(garbage))) {
		t.Fatalf("gc %+v: want the unreferenced cold layer and its compressed object gone", g)
	}
	if !s.Compacted(kept) || !s.hasCompressed(DigestOf([]byte(keptData))) {
		t.Fatal("gc touched the referenced cold layer")
	}
	if _, err := s.Materialize(t.Context(), kept); err != nil {
		t.Fatal(err)
	}
	verifyOK(t, s)
}

// TestCompactConcurrentLease: a lease asked while Compact runs waits for
// its first step (the exclusive store lock while it marks layers cold),
// not for the whole compaction, then thaws what it made cold: the sandbox
// that asked gets the trees as they were, and the rest of Compact leaves
// raw the objects the thawed trees link again.
func TestCompactConcurrentLease(t *testing.T) {
	s := newStore(t)
	base, env, views := coldLayers(t, s)
	started := make(chan struct{})
	var leased atomic.Bool
	s.hooks.compact = func(stage string) error {
		if stage == "start" {
			close(started)
			time.Sleep(200 * time.Millisecond) // the lease is asked meanwhile
			if leased.Load() {
				t.Error("the lease was taken while Compact marked layers cold")
			}
		}
		return nil
	}
	done := make(chan CompactReport, 1)
	go func() {
		r, err := s.Compact(t.Context(), CompactOptions{})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	<-started
	l, err := s.Lease(t.Context(), env)
	if err != nil {
		t.Fatal(err)
	}
	leased.Store(true)
	defer l.Release()
	if r := <-done; len(r.Layers) != 2 {
		t.Fatalf("compact %+v: want both layers cold before the lease", r)
	}
	for _, id := range []LayerID{base, env} {
		if s.Compacted(id) {
			t.Fatalf("layer %s cold under a lease", id.Short())
		}
		diffViews(t, views[id], view(t, s.TreePath(id)))
	}
	verifyOK(t, s)
}
