package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const leaseHelperEnv = "MSB_STORE_LEASE_HELPER"

func commitNodes(t *testing.T, s *Store, nodes map[string]node, opts CommitOptions) LayerID {
	t.Helper()
	src := t.TempDir()
	writeTree(t, src, nodes)
	id, err := s.CommitDir(t.Context(), src, opts)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestLeasesAndGC(t *testing.T) {
	s := newStore(t)
	base := commitNodes(t, s, map[string]node{"base": {content: "base"}, "shared": {content: "shared"}}, CommitOptions{})
	env := commitNodes(t, s, map[string]node{"env": {content: "env"}}, CommitOptions{Parents: []LayerID{base}, Ref: "env/e"})
	leased := commitNodes(t, s, map[string]node{"leased": {content: "leased only"}}, CommitOptions{})
	orphan := commitNodes(t, s, map[string]node{"orphan": {content: "orphan only"}, "shared": {content: "shared"}}, CommitOptions{})
	os.WriteFile(s.path("tmp", "obj-stale"), []byte("crash leftover"), 0o644)
	os.MkdirAll(s.path("layers", ".tmp-stale-1"), 0o755)

	lease, err := s.Lease(t.Context(), leased)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.GC(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Layers, []LayerID{orphan}) {
		t.Fatalf("gc removed %v, want only the orphan %s", r.Layers, orphan)
	}
	if r.Objects != 1 || r.Inodes != 1 || r.Temp != 2 || r.FreedBytes <= 0 {
		t.Errorf("gc report %+v: want 1 object, 1 inode, 2 temp, some bytes", r)
	}
	for _, id := range []LayerID{base, env, leased} {
		if !s.Has(id) {
			t.Errorf("gc removed kept layer %s", id)
		}
	}
	if s.HasObject(DigestOf([]byte("orphan only"))) || !s.HasObject(DigestOf([]byte("shared"))) {
		t.Error("gc kept the orphan's object or removed a shared one")
	}
	if err := lease.Release(); err != nil {
		t.Fatal(err)
	}
	r, err = s.GC(t.Context())
	if err != nil || !slices.Equal(r.Layers, []LayerID{leased}) {
		t.Fatalf("after release gc removed %v (%v), want %s", r.Layers, err, leased)
	}
	if err := s.DeleteRef("env/e"); err != nil {
		t.Fatal(err)
	}
	r, err = s.GC(t.Context())
	if err != nil || len(r.Layers) != 2 {
		t.Fatalf("after deleting the ref gc removed %v (%v), want env and base", r.Layers, err)
	}
	for _, d := range []string{"objects", "inodes", "manifests", "tmp", "leases"} {
		if n := countFiles(t, s.path(d)); n != 0 {
			t.Errorf("%s holds %d files after everything was collected", d, n)
		}
	}
	if vr, err := s.Verify(t.Context()); err != nil || !vr.OK() {
		t.Fatalf("verify: %v %v", err, vr.Problems)
	}
}

// TestLeaseOfDeadProcess: a lease held by a process that was killed is
// released by the kernel, and GC then collects.
func TestLeaseOfDeadProcess(t *testing.T) {
	s := newStore(t)
	id := commitNodes(t, s, map[string]node{"f": {content: "leased by a child"}}, CommitOptions{})
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaseHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), leaseHelperEnv+"="+s.Root()+"|"+id.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "leased") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper said %q", line)
	}
	r, err := s.GC(t.Context())
	if err != nil || len(r.Layers) != 0 {
		t.Fatalf("gc while the holder lives removed %v (%v)", r.Layers, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	r, err = s.GC(t.Context())
	if err != nil || !slices.Equal(r.Layers, []LayerID{id}) || r.Leases != 1 {
		t.Fatalf("gc after the holder died: %+v (%v)", r, err)
	}
}

func TestLeaseHelper(t *testing.T) {
	arg := os.Getenv(leaseHelperEnv)
	if arg == "" {
		t.Skip("run by TestLeaseOfDeadProcess")
	}
	root, idText, _ := strings.Cut(arg, "|")
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	id, err := ParseLayerID(idText)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lease(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	fmt.Println("leased")
	time.Sleep(time.Minute)
}

// TestGCWaitsForCommits: GC takes the store lock exclusively, so it cannot
// run while a commit holds it shared.
func TestGCWaitsForCommits(t *testing.T) {
	s := newStore(t)
	unlock, err := s.lock(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.GC(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("gc during a commit: %v, want to wait", err)
	}
	unlock()
	if _, err := s.GC(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestLeaseNeedsMaterializedLayer(t *testing.T) {
	s := newStore(t)
	id := commitNodes(t, s, map[string]node{"f": {content: "x"}}, CommitOptions{})
	os.RemoveAll(filepath.Dir(s.TreePath(id)))
	if _, err := s.Lease(t.Context(), id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("lease of an unmaterialized layer: %v", err)
	}
}
