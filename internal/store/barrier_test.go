package store

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// flushes records what each barrier of a store flushed.
type flushes struct {
	paths [][]string
	whole []bool
}

func watchFlushes(s *Store) *flushes {
	f := &flushes{}
	s.hooks.flush = func(paths []string, whole bool) {
		f.paths = append(f.paths, slices.Clone(paths))
		f.whole = append(f.whole, whole)
	}
	return f
}

// TestCommitBarriers: a commit with a ref passes three barriers whatever
// its size (content, names and tree, the ref's rename), one without two;
// one of a few files fsyncs them and their directories instead of syncing
// the whole filesystem, which a commit of many files, or of a symlink,
// does.
func TestCommitBarriers(t *testing.T) {
	many := map[string]node{}
	for i := range maxFsyncs + 1 {
		many[fmt.Sprintf("d/f%d", i)] = node{content: fmt.Sprintf("file %d", i)}
	}
	for _, tc := range []struct {
		name  string
		nodes map[string]node
		whole []bool
	}{
		{"few files", map[string]node{"a": {content: "a"}, "d/b": {content: "b"}}, []bool{false, false, false}},
		{"many files", many, []bool{true, true, false}},
		{"a symlink", map[string]node{"a": {content: "a"}, "l": {symlink: "a"}}, []bool{false, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			f := watchFlushes(s)
			id := commitNodes(t, s, tc.nodes, CommitOptions{Ref: "r"})
			if !slices.Equal(f.whole, tc.whole) {
				t.Fatalf("barriers synced the whole filesystem %v, want %v (paths %v)", f.whole, tc.whole, f.paths)
			}
			if tc.whole[0] {
				return
			}
			content := f.paths[0]
			if n := countPrefix(content, s.path("tmp")); n != len(content) || n < 3 {
				t.Errorf("content barrier flushed %v: want the temp files of the objects, manifest and ref", content)
			}
			if !slices.Contains(f.paths[1], s.path("manifests")) || !slices.Contains(f.paths[1], filepath.Dir(s.objectPath(DigestOf([]byte("a"))))) {
				t.Errorf("names barrier flushed %v: want the manifests dir and the objects' dirs", f.paths[1])
			}
			if last := f.paths[2]; !slices.Equal(last, []string{s.path("refs")}) {
				t.Errorf("last barrier flushed %v: want the refs dir", last)
			}
			if got, err := s.Ref("r"); err != nil || got != id {
				t.Fatalf("ref r = %s (%v), want %s", got, err, id)
			}
			f.whole, f.paths = nil, nil
			tc.nodes["another"] = node{content: "another " + tc.name}
			commitNodes(t, s, tc.nodes, CommitOptions{})
			if len(f.whole) != 2 {
				t.Errorf("a commit without a ref passed %d barriers (%v), want 2", len(f.whole), f.paths)
			}
		})
	}
}

func countPrefix(paths []string, prefix string) int {
	n := 0
	for _, p := range paths {
		if strings.HasPrefix(p, prefix+"/") {
			n++
		}
	}
	return n
}

const killedCommitEnv = "MSB_STORE_KILLED_COMMIT"

// TestCommitKilled: a process killed (SIGKILL) before any of a commit's
// three barriers, or after the last, leaves a store that Verify passes,
// before and after a gc, in which the ref is absent or names the layer, which can
// be materialized (its tree is a cache of its manifest and objects). The
// same for a directory's layer published with a record layer above it
// (Publish of two staged layers, as a snapshot is).
func TestCommitKilled(t *testing.T) {
	nodes := map[string]node{"a": {content: "killed a"}, "d/b": {content: "killed b"}, "d/c": {content: strings.Repeat("c", 3<<20)}}
	src0 := filepath.Join(t.TempDir(), "src")
	writeTree(t, src0, nodes)
	s0 := newStore(t)
	data, record := stageWithRecord(t, s0, src0)
	data.Discard()
	record.Discard()
	wants := map[string]LayerID{"dir": commitNodes(t, s0, nodes, CommitOptions{}), "with-record": record.ID, "written-out-first": record.ID, "hashed-later": record.ID}
	for _, how := range []string{"dir", "with-record", "written-out-first", "hashed-later"} {
		for k := 1; k <= 4; k++ {
			t.Run(fmt.Sprintf("%s-killed-before-barrier-%d", how, k), func(t *testing.T) {
				killedCommit(t, nodes, how, k, wants[how])
			})
		}
	}
}

// killedAtBarrier runs helper (a test of this binary that kills itself
// before barrier k) on a new store, committing nodes with the fourth
// field extra, checks that it was killed, then that the store verifies
// as it was left and after a gc; what names the operation in failures.
func killedAtBarrier(t *testing.T, nodes map[string]node, helper, env string, k int, extra, what string) *Store {
	t.Helper()
	s := newStore(t)
	src := filepath.Join(t.TempDir(), "src")
	writeTree(t, src, nodes)
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%d|%s", env, s.Root(), src, k, extra))
	out, err := cmd.CombinedOutput()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("helper was not killed at the barrier: %v\n%s", err, out)
	}
	for _, gc := range []bool{false, true} {
		if gc {
			if _, err := s.GC(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
			t.Fatalf("verify (gc first: %v) after %s killed before barrier %d: %v %v", gc, what, k, err, r.Problems)
		}
	}
	return s
}

// killedCommit runs TestKilledCommitHelper on a new store, committing
// nodes as how says and killed before barrier k, and checks the store.
func killedCommit(t *testing.T, nodes map[string]node, how string, k int, want LayerID) {
	s := killedAtBarrier(t, nodes, "TestKilledCommitHelper", killedCommitEnv, k, how, "a commit")
	id, err := s.Ref("r")
	if err != nil {
		if k == 4 {
			t.Fatalf("the ref is gone after its barrier passed: %v", err)
		}
		return
	}
	if id != want {
		t.Fatalf("ref r names %s, want %s", id, want)
	}
	if _, err := s.Materialize(t.Context(), id); err != nil {
		t.Fatalf("the ref's layer: %v", err)
	}
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Fatalf("verify after materializing the ref's layer: %v %v", err, r.Problems)
	}
}

// TestKilledCommitHelper commits a directory (with a record layer above
// it: "with-record"; its data written back first: "written-out-first";
// hashed as it is written back: "hashed-later")
// and kills itself before barrier k (k 4: after the last), for
// TestCommitKilled.
func TestKilledCommitHelper(t *testing.T) {
	s, f, k, kill := killedHelperStore(t, killedCommitEnv, "TestCommitKilled")
	var err error
	switch f[3] {
	case "with-record":
		data, record := stageWithRecord(t, s, f[1])
		err = s.Publish(t.Context(), "r", data, record)
	case "written-out-first":
		data, record := heldStage(t, s, f[1], 64<<20)
		if err := data.WriteOut(t.Context()); err != nil {
			t.Fatal(err)
		}
		err = s.Publish(t.Context(), "r", data, record)
	case "hashed-later":
		data, record := laterStage(t, s, f[1], 64<<20)
		err = s.Publish(t.Context(), "r", data, record)
	default:
		_, err = s.CommitDir(t.Context(), f[1], CommitOptions{Ref: "r"})
	}
	if k == 4 {
		kill()
	}
	t.Fatalf("not killed before barrier %d: %v", k, err)
}

// killedHelperStore is the start of a helper a crash test runs in a
// process of its own (env holds "store dir|source dir|k|..."): it
// opens the store, with a flush hook that kills the process at its k-th
// barrier, and returns the store, the fields, k and the kill. It skips
// when the test is not run by test (by).
func killedHelperStore(t *testing.T, env, by string) (*Store, []string, int, func()) {
	arg := os.Getenv(env)
	if arg == "" {
		t.Skip("run by " + by)
	}
	f := strings.Split(arg, "|")
	s, err := Open(f[0])
	if err != nil {
		t.Fatal(err)
	}
	k, _ := strconv.Atoi(f[2])
	n := 0
	kill := func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	s.hooks.flush = func([]string, bool) {
		if n++; n == k {
			kill()
		}
	}
	return s, f, k, kill
}

const unreadableHelperEnv = "MSB_STORE_UNREADABLE_HELPER"

// TestCommitUnreadableByOwner: an unprivileged committer of a file it
// may read as "other" only (mode 0004, another uid's) writes an object
// whose mode denies its owner reading, which the barrier cannot open to
// fsync: it syncs the filesystem instead, and the commit succeeds.
func TestCommitUnreadableByOwner(t *testing.T) {
	requireRoot(t)
	dir, bin := nobodysTestBinary(t, "msb-unreadable-")
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(src, "others-only")
	if err := os.WriteFile(f, []byte("readable by others only"), 0o004); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p        string
		uid, gid int
		mode     os.FileMode
	}{{src, 65534, 65534, 0o755}, {f, 1, 1, 0o004}} {
		if err := os.Chown(c.p, c.uid, c.gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(c.p, c.mode); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-test.run=^TestUnreadableHelper$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), unreadableHelperEnv+"="+dir, "TMPDIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, NoSetGroups: true}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestUnreadableHelper") {
		t.Fatalf("unprivileged commit: %v\n%s", err, out)
	}
}

// TestUnreadableHelper is the child of TestCommitUnreadableByOwner.
func TestUnreadableHelper(t *testing.T) {
	dir := os.Getenv(unreadableHelperEnv)
	if dir == "" {
		t.Skip("run by TestCommitUnreadableByOwner")
	}
	s, err := Open(filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	f := watchFlushes(s)
	id, err := s.CommitDir(t.Context(), filepath.Join(dir, "src"), CommitOptions{Ref: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.whole) == 0 || f.whole[0] {
		t.Fatalf("the content barrier was planned as a syncfs already: %v %v", f.whole, f.paths)
	}
	if got, err := s.Ref("r"); err != nil || got != id {
		t.Fatalf("ref r = %s (%v), want %s", got, err, id)
	}
}
