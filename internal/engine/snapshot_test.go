package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/cgroup"
	"github.com/minisandbox/msb/internal/engine/host"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/store"
)

// snapshotEngine opens an engine for snapshot tests and fails them at
// their end on sandbox processes or snapshot mounts left behind.
func snapshotEngine(t *testing.T) *Engine {
	t.Helper()
	var e *Engine
	t.Cleanup(func() { // after the engine's close, which waits for cleanups
		if err := privtest.CheckLeaks(e.cfg.StateDir); err != nil {
			t.Error(err)
		}
	})
	e = openEngine(t, "", nil)
	return e
}

// sh runs command in the sandbox (in session when not empty) and returns
// its output; a non-zero exit fails the test.
func sh(t *testing.T, s *Sandbox, session, command string) string {
	t.Helper()
	res, err := s.Exec(context.Background(), api.ExecRequest{Session: session, Command: command, TimeoutNs: int64(time.Minute)})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: %q: %v %+v", s.ID(), command, err, res)
	}
	return res.Stdout
}

// hostSandbox creates a raw sandbox on the host base in e, closed at the
// end of the test.
func hostSandbox(t *testing.T, e *Engine) *Sandbox {
	t.Helper()
	s, err := e.CreateSandbox(context.Background(), SandboxRequest{HostBase: true})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, s)
	return s
}

// closeAll closes sandboxes at the end of the test.
func closeAll(t testing.TB, sbs ...*Sandbox) {
	t.Cleanup(func() {
		for _, s := range sbs {
			s.Close()
		}
	})
}

// TestSnapshotFork forks a task sandbox whose agent deleted a tracked
// file, wrote another and moved its session: each child has the files
// (the deleted one still deleted), the session's cwd and exported
// variables, the parent's labels plus its own, and is a task sandbox of
// the same instance; what one child writes, neither the parent nor its
// sibling sees, nor the children what the parent writes after.
func TestSnapshotFork(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	id := generated(t).Instances[0].InstanceID
	parent, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: id, Labels: map[string]string{"job": "j", "role": "parent"}})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, parent)
	if err := parent.OpenSession(ctx, api.SessionRequest{Name: "main"}); err != nil {
		t.Fatal(err)
	}
	sh(t, parent, "main", "git rm -q calc/text.py && echo kept > NOTES.txt && cd calc && export STEP=7")
	kids, err := e.Fork(ctx, parent.ID(), api.ForkRequest{Count: 2, Labels: map[string]string{"role": "child"}})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, kids...)
	if len(kids) != 2 {
		t.Fatalf("%d children", len(kids))
	}
	for _, k := range kids {
		info := k.Info()
		want := map[string]string{"job": "j", "role": "child"}
		if info.InstanceID != id || !maps.Equal(map[string]string(info.Labels), want) || !slices.Equal(info.Sessions, []string{"main"}) {
			t.Fatalf("child %+v", info)
		}
		if got := sh(t, k, "main", `echo "$PWD $STEP"; cat /testbed/NOTES.txt; ls /testbed/calc/text.py 2>&1 || true`); !strings.HasPrefix(got, "/testbed/calc 7\nkept\n") || !strings.Contains(got, "No such file") {
			t.Fatalf("child %s sees %q", k.ID(), got)
		}
		diff, err := k.Diff(ctx)
		if err != nil || !strings.Contains(diff, "b/NOTES.txt") || !strings.Contains(diff, "deleted file mode") {
			t.Fatalf("child's diff: %v\n%s", err, diff)
		}
	}
	sh(t, kids[0], "main", "echo mine > /testbed/kid0.txt")
	sh(t, parent, "main", "echo later > /testbed/parent.txt")
	for _, c := range []struct {
		s    *Sandbox
		file string
	}{{parent, "kid0.txt"}, {kids[1], "kid0.txt"}, {kids[0], "parent.txt"}, {kids[1], "parent.txt"}} {
		if _, err := c.s.Stat(ctx, "/testbed/"+c.file); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("%s sees %s: %v", c.s.ID(), c.file, err)
		}
	}
}

// TestSnapshotConsistent snapshots a sandbox while a process in it writes
// files without pause, alternately in two directories (a/N, then b/N):
// every snapshot must be a state that existed, b a prefix of a that
// lags by at most the file being written.
func TestSnapshotConsistent(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	s, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: generated(t).Instances[0].InstanceID})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, s)
	if err := s.OpenSession(ctx, api.SessionRequest{Name: "w"}); err != nil {
		t.Fatal(err)
	}
	// The writer stops at 400000 files, within a rootless disk's 524288
	// inodes (as TestRollbackInPlace's).
	sh(t, s, "w", `mkdir -p /testbed/w/a /testbed/w/b; (i=0; while [ $i -lt 200000 ]; do : >/testbed/w/a/$i; : >/testbed/w/b/$i; i=$((i+1)); done) >/dev/null 2>&1 &`)
	// Two snapshots at a time: one's thaw must not end the other's freeze.
	for round := range 3 {
		waitFiles(t, s, "/testbed/w/b", 200)
		var wg sync.WaitGroup
		for _, side := range []string{"x", "y"} {
			name := fmt.Sprintf("consistent-%d-%s", round, side)
			t.Cleanup(func() { e.DeleteSnapshot(name) })
			wg.Go(func() { checkConsistent(t, e, s.ID(), name) })
		}
		wg.Wait()
	}
}

// checkConsistent takes snapshot name of sandbox id, whose writer fills
// /testbed/w/a and b in step, and checks it is a state that existed.
func checkConsistent(t *testing.T, e *Engine, id, name string) {
	info, err := e.Snapshot(context.Background(), id, api.SnapshotRequest{Name: name})
	if err != nil {
		t.Error(err)
		return
	}
	layer, err := store.ParseLayerID(info.Layer)
	if err == nil {
		err = e.WaitSnapshot(context.Background(), name) // in the store
	}
	if err != nil {
		t.Error(err)
		return
	}
	m, err := e.cache.st().Manifest(layer)
	if err != nil {
		t.Error(err)
		return
	}
	a, b := numbered(m, "testbed/w/a/"), numbered(m, "testbed/w/b/")
	if len(a) == 0 || !isPrefix(a) || !isPrefix(b) || len(a)-len(b) > 1 || len(b) > len(a) {
		t.Errorf("%s: a has %d files (prefix %v), b %d (prefix %v): not a state that existed", name, len(a), isPrefix(a), len(b), isPrefix(b))
	}
}

func countFiles(t *testing.T, s *Sandbox, dir string) int {
	ents, err := s.ListDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// numbered lists the numbers of the files directly under prefix in m.
func numbered(m *store.Manifest, prefix string) []int {
	var out []int
	for _, en := range m.Entries {
		rest, ok := strings.CutPrefix(en.Path, prefix)
		if !ok || en.Type != store.TypeFile {
			continue
		}
		if n, err := strconv.Atoi(rest); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// isPrefix reports whether ns (sorted) is 0, 1, ..., len(ns)-1.
func isPrefix(ns []int) bool {
	for i, n := range ns {
		if n != i {
			return false
		}
	}
	return true
}

// TestSnapshotRollback undoes destructive commands: after rm -rf /testbed
// with a broken git index, a rollback to a named snapshot brings back the
// snapshot's files and its session's cwd and variables, under the same
// id; a rollback without one, the state at creation.
func TestSnapshotRollback(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	s, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: generated(t).Instances[0].InstanceID, Labels: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, s)
	if err := s.OpenSession(ctx, api.SessionRequest{Name: "main"}); err != nil {
		t.Fatal(err)
	}
	sh(t, s, "main", "echo step1 > STEP.txt && cd calc && export PHASE=one")
	if _, err := e.Snapshot(ctx, s.ID(), api.SnapshotRequest{Name: "rollback-one"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.DeleteSnapshot("rollback-one") })
	sh(t, s, "main", "echo garbage > /testbed/.git/index; cd / && rm -rf /testbed; export PHASE=two")
	info, err := e.Rollback(ctx, s.ID(), api.RollbackRequest{Snapshot: "rollback-one"})
	if err != nil {
		t.Fatal(err)
	}
	if info.ID != s.ID() || info.Labels["k"] != "v" || !slices.Equal(info.Sessions, []string{"main"}) {
		t.Fatalf("after rollback: %+v", info)
	}
	if got := sh(t, s, "main", `echo "$PWD $PHASE"; cat /testbed/STEP.txt; cd /testbed && git status --short`); got != "/testbed/calc one\nstep1\n?? STEP.txt\n" {
		t.Fatalf("after rollback to the snapshot: %q", got)
	}
	sh(t, s, "main", "cd / && rm -rf /testbed")
	if _, err := e.Rollback(ctx, s.ID(), api.RollbackRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, s, "main", `echo "$PWD ${PHASE-unset}"; git status --short`); got != "/testbed unset\n" {
		t.Fatalf("after rollback to creation: %q", got)
	}
	if n := len(e.Sandboxes(nil)); n != 1 {
		t.Fatalf("%d sandboxes after two rollbacks", n)
	}
	if _, err := e.Rollback(ctx, s.ID(), api.RollbackRequest{Snapshot: "no-such"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rollback to a missing snapshot: %v", err)
	}
}

// TestSnapshotRestartAndGC: a named snapshot is listed, survives the
// engine (a new one on the same cache forks from it), is refused twice,
// and once deleted gc removes its layers.
func TestSnapshotRestartAndGC(t *testing.T) {
	ctx := context.Background()
	id := generated(t).Instances[0].InstanceID
	e1 := snapshotEngine(t)
	s, err := e1.CreateSandbox(ctx, SandboxRequest{InstanceID: id})
	if err != nil {
		t.Fatal(err)
	}
	sh(t, s, "", "echo saved > /testbed/SAVED.txt")
	info, err := e1.Snapshot(ctx, s.ID(), api.SnapshotRequest{Name: "restart"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e1.DeleteSnapshot("restart") })
	if _, err := e1.Snapshot(ctx, s.ID(), api.SnapshotRequest{Name: "restart"}); !errors.Is(err, ErrSnapshotExists) {
		t.Fatalf("second snapshot of the same name: %v", err)
	}
	s.Close()
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}

	e2 := snapshotEngine(t)
	list, err := e2.Snapshots()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list, func(x api.SnapshotInfo) bool { return x.Name == "restart" })
	if i < 0 || list[i].Layer != info.Layer || list[i].InstanceID != id || list[i].Files == 0 {
		t.Fatalf("listing %+v, want %+v", list, info)
	}
	base, err := e2.CreateSandbox(ctx, SandboxRequest{InstanceID: id})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, base)
	kids, err := e2.Fork(ctx, base.ID(), api.ForkRequest{Snapshot: "restart"})
	if err != nil {
		t.Fatal(err)
	}
	if got := sh(t, kids[0], "", "cat /testbed/SAVED.txt"); got != "saved\n" {
		t.Fatalf("child of the restored snapshot reads %q", got)
	}
	kids[0].Close()
	// From the name alone: a task sandbox of the instance, its source gone.
	alone, err := e2.Fork(ctx, "", api.ForkRequest{Snapshot: "restart", Labels: map[string]string{"from": "name"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := sh(t, alone[0], "", "pwd; cat SAVED.txt"); got != "/testbed\nsaved\n" || alone[0].Info().InstanceID != id || alone[0].Info().Labels["from"] != "name" {
		t.Fatalf("child of the name alone: %q %+v", got, alone[0].Info())
	}
	if diff, err := alone[0].Diff(ctx); err != nil || !strings.Contains(diff, "b/SAVED.txt") {
		t.Fatalf("diff of the child of the name alone: %v\n%s", err, diff)
	}
	alone[0].Close()
	if err := e2.DeleteSnapshot("restart"); err != nil {
		t.Fatal(err)
	}
	if err := e2.DeleteSnapshot("restart"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting twice: %v", err)
	}
	layer, _ := store.ParseLayerID(info.Layer)
	rep, err := e2.cache.st().GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Layers, layer) {
		t.Fatalf("gc kept the deleted snapshot's layer %s: %+v", layer.Short(), rep)
	}
	if _, err := os.Stat(e2.cache.st().TreePath(layer)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("snapshot layer still on disk: %v", err)
	}
}

// TestSnapshotForkQuota: each child is admitted as a create is; a fork
// past the quota fails with ErrQuota naming the limit and leaves no
// child, and a fork asked to carry processes is refused.
func TestSnapshotForkQuota(t *testing.T) {
	e := openEngine(t, "", func(c *Config) { c.MaxSandboxes, c.GradingReserve = 3, -1 })
	ctx := context.Background()
	s, err := e.CreateSandbox(ctx, SandboxRequest{Layers: nil, HostBase: true})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, s)
	if _, err := e.Fork(ctx, s.ID(), api.ForkRequest{Count: 3}); !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "sandboxes") {
		t.Fatalf("fork of 3 beside 1 under a limit of 3: %v", err)
	}
	if n := len(e.Sandboxes(nil)); n != 1 {
		t.Fatalf("%d sandboxes after a refused fork", n)
	}
	kids, err := e.Fork(ctx, s.ID(), api.ForkRequest{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, kids...)
	for _, req := range []api.ForkRequest{{Processes: "criu"}, {Count: -1}, {Count: MaxForkCount + 1}} {
		if _, err := e.Fork(ctx, s.ID(), req); !errors.Is(err, ErrBadRequest) {
			t.Errorf("fork %+v: %v", req, err)
		}
	}
}

// TestSnapshotForkFails: a fork whose snapshot of the live state fails
// (here its context ends while the parent is frozen) returns the
// snapshot's error, though its children's starts began beside it, and
// leaves no child: none listed, and none of their processes, mounts or
// cgroups (snapshotEngine's check). The parent is thawed and answers.
func TestSnapshotForkFails(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	parent := hostSandbox(t, e)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	testHookFrozen = func(*sandbox.Sandbox) { cancel() }
	defer func() { testHookFrozen = func(*sandbox.Sandbox) {} }()
	if _, err := e.Fork(fctx, parent.ID(), api.ForkRequest{Count: 2}); !errors.Is(err, context.Canceled) {
		t.Fatalf("fork whose snapshot was cancelled: %v", err)
	}
	if n := len(e.Sandboxes(nil)); n != 1 {
		t.Fatalf("%d sandboxes after a failed fork", n)
	}
	sh(t, parent, "", "true")
}

// BenchmarkSnapshot measures, on a raw sandbox that wrote 8 MiB in 64
// files: a named snapshot, a fork of one child to its first command, a
// fork of 8, and a rollback to the snapshot.
func BenchmarkSnapshot(b *testing.B) {
	ctx := context.Background()
	e, err := Open(ctx, Config{StateDir: b.TempDir(), Cache: CacheConfig{Dir: b.TempDir()}})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	s, err := e.CreateSandbox(ctx, SandboxRequest{HostBase: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	res, err := s.Exec(ctx, api.ExecRequest{Command: "mkdir /data && for i in $(seq 64); do head -c 131072 /dev/urandom >/data/$i; done"})
	if err != nil || res.ExitCode != 0 {
		b.Fatal(err, res)
	}
	if _, err := e.Snapshot(ctx, s.ID(), api.SnapshotRequest{Name: "bench"}); err != nil {
		b.Fatal(err)
	}
	defer e.DeleteSnapshot("bench")
	b.Run("snapshot-8MiB", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			name := fmt.Sprintf("bench-%d", i)
			if _, err := e.Snapshot(ctx, s.ID(), api.SnapshotRequest{Name: name}); err != nil {
				b.Fatal(err)
			}
			e.DeleteSnapshot(name)
		}
	})
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("fork-%d-first-command", n), func(b *testing.B) {
			for b.Loop() {
				kids, err := e.Fork(ctx, s.ID(), api.ForkRequest{Count: n, Snapshot: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := kids[0].Exec(ctx, api.ExecRequest{Command: "true"}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				for _, k := range kids {
					k.Close()
				}
				b.StartTimer()
			}
		})
	}
	b.Run("rollback", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.Rollback(ctx, s.ID(), api.RollbackRequest{Snapshot: "bench"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestSnapshotKilledWhileFrozen: msb killed (SIGKILL) while a sandbox is
// frozen for a snapshot leaves nothing once the next engine opens on the
// same state dir: the sandbox's processes are gone (a v1 frozen group is
// thawed to let them die), and its cgroups and state with them.
func TestSnapshotKilledWhileFrozen(t *testing.T) {
	if os.Getenv(frozenChildEnv) != "" {
		frozenChild(t)
		return
	}
	privtest.RequireRoot(t)
	state, cache := privtest.StateDir(t), t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSnapshotKilledWhileFrozen$", "-test.count=1")
	cmd.Env = append(os.Environ(), frozenChildEnv+"="+state+":"+cache)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	cmd.Process.Kill()
	cmd.Wait()
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "frozen" {
		t.Fatalf("the child said %q", line)
	}
	pid, _ := strconv.Atoi(f[1])
	e, err := Open(context.Background(), Config{StateDir: state, Cache: CacheConfig{Dir: cache}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; processLives(pid); i++ {
		if i == 2000 {
			t.Fatalf("the frozen sandbox's init %d outlived the next engine's open", pid)
		}
		time.Sleep(time.Millisecond)
	}
	for _, d := range f[2:] {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s is left: %v", d, err)
		}
	}
}

// frozenChildEnv holds, in the child of TestSnapshotKilledWhileFrozen,
// its state and cache dirs.
const frozenChildEnv = "MSB_TEST_FROZEN_CHILD"

// frozenChild creates a sandbox and snapshots it, printing, once frozen,
// its init's pid and cgroup dirs, then waits to be killed.
func frozenChild(t *testing.T) {
	state, cache, _ := strings.Cut(os.Getenv(frozenChildEnv), ":")
	e, err := Open(context.Background(), Config{StateDir: state, Cache: CacheConfig{Dir: cache}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.CreateSandbox(context.Background(), SandboxRequest{HostBase: true})
	if err != nil {
		t.Fatal(err)
	}
	testHookFrozen = func(sb *sandbox.Sandbox) {
		fmt.Printf("frozen %d %s\n", sb.InitPid(), strings.Join(cgroupDirs(sb.InitPid()), " "))
		select {}
	}
	e.Snapshot(context.Background(), s.ID(), api.SnapshotRequest{Name: "killed"})
}

// cgroupDirs are the cgroup directories pid is in, but the roots.
func cgroupDirs(pid int) []string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	var out []string
	for line := range strings.Lines(string(b)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 || f[2] == "/" || strings.HasPrefix(f[1], "name=") {
			continue
		}
		ctrl, _, _ := strings.Cut(f[1], ",")
		out = append(out, filepath.Join(cgroup.Root, ctrl, f[2]))
	}
	return out
}

// processLives reports whether pid is a process that has not exited.
func processLives(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	st := string(b)
	f := strings.Fields(st[strings.LastIndexByte(st, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// TestSnapshotRollbackBesideCalls rolls a sandbox back while other
// goroutines run commands in it: each call either answers or fails as
// on a closed sandbox, and after the rollback every call answers.
func TestSnapshotRollbackBesideCalls(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	s := hostSandbox(t, e)
	stop := callsBeside(func() error {
		_, err := s.ReadFile(ctx, "/etc/hostname", 0)
		if err == nil {
			_, err = s.Exec(ctx, api.ExecRequest{Command: "true"})
		}
		if err != nil && !errors.Is(err, sandbox.ErrClosed) {
			return err
		}
		return nil
	})
	for range 3 {
		if _, err := e.Rollback(ctx, s.ID(), api.RollbackRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, err := range stop() {
		t.Errorf("a call beside a rollback: %v", err)
	}
	sh(t, s, "", "true")
}

// callsBeside runs call in two goroutines, again and again, until the
// returned stop is called; a goroutine whose call fails stops, and stop
// returns those errors.
func callsBeside(call func() error) (stop func() []error) {
	done := make(chan struct{})
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := call(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	return func() []error {
		close(done)
		wg.Wait()
		close(errs)
		var out []error
		for err := range errs {
			out = append(out, err)
		}
		return out
	}
}

// TestSnapshotAsBase: a named snapshot is an environment source like any
// base (rootfs.Resolve of snapshot/<name>): a one-shot sandbox on it, as
// msb run --base snapshot/<name> makes, sees the files the snapshot's
// sandbox wrote, over the host's directories that sandbox ran on, with
// its environment and working directory as defaults.
func TestSnapshotAsBase(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	s, err := e.CreateSandbox(ctx, SandboxRequest{HostBase: true, Env: []string{"SNAPVAR=kept"}, Workdir: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, s)
	sh(t, s, "", "mkdir /data && echo written > /data/file")
	if _, err := e.Snapshot(ctx, s.ID(), api.SnapshotRequest{Name: "as-base"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.DeleteSnapshot("as-base") })
	ir, err := e.Cache().ImageRoot(ctx, "snapshot/as-base")
	if err != nil {
		t.Fatal(err)
	}
	defer ir.Lease.Release()
	if !ir.HostBase || len(ir.Layers) != 1 || ir.Ref != "snapshot/as-base" {
		t.Fatalf("root of the snapshot: %+v", ir)
	}
	var out strings.Builder
	h := host.Wrap(e.rt)
	res, err := h.Run(ctx, SandboxConfig{HostBase: ir.HostBase, Layers: ir.Layers, Env: ir.Config.Env, Workdir: ir.Config.WorkingDir,
		Stdio: &Stdio{Out: &out, Err: &out}}, []string{"/bin/sh", "-c", `cat /data/file; echo "$SNAPVAR $PWD"; test -x /bin/sh`})
	if err != nil || res.Code != 0 || out.String() != "written\nkept /tmp\n" {
		t.Fatalf("a sandbox on the snapshot: %v %+v %q", err, res, out.String())
	}
	if _, err := e.Cache().ImageRoot(ctx, "snapshot/none"); !errors.Is(err, rootfs.ErrNoSnapshot) {
		t.Fatalf("an unknown snapshot: %v", err)
	}
}

// TestSnapshotBesideStarts snapshots a sandbox again and again while
// commands start in it: a cgroup v1 group frozen while a process is in
// vfork can stay FREEZING for good, which hung a fork beside a streaming
// command until the client gave up. Every snapshot must finish.
func TestSnapshotBesideStarts(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	s := hostSandbox(t, e)
	stop := callsBeside(func() error {
		s.Exec(ctx, api.ExecRequest{Command: "for i in 1 2 3 4 5 6 7 8; do /bin/true; done"})
		return nil
	})
	defer stop()
	for i := range 40 {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err := e.Snapshot(sctx, s.ID(), api.SnapshotRequest{Name: fmt.Sprintf("beside-%d", i)})
		cancel()
		if err != nil {
			t.Fatalf("snapshot %d beside starting commands: %v", i, err)
		}
		e.DeleteSnapshot(fmt.Sprintf("beside-%d", i))
	}
}

// TestSnapshotLongFreeze: the sessions are asked for their state while
// the writable layer is committed, so a freeze that outlasts the probe's
// timeout catches the probe; the state is then asked again after the
// thaw, not lost.
func TestSnapshotLongFreeze(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	s := hostSandbox(t, e)
	if err := s.OpenSession(ctx, api.SessionRequest{Name: "main"}); err != nil {
		t.Fatal(err)
	}
	sh(t, s, "main", "mkdir -p /work/long && cd /work/long && export LONG=1")
	testHookFrozen = func(*sandbox.Sandbox) { time.Sleep(sessionProbeTimeout + sessionProbeTimeout/4) }
	defer func() { testHookFrozen = func(*sandbox.Sandbox) {} }()
	info, err := e.Snapshot(ctx, s.ID(), api.SnapshotRequest{Name: "long"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.DeleteSnapshot("long") })
	if len(info.Sessions) != 1 || info.Sessions[0].Cwd != "/work/long" || !slices.Contains(info.Sessions[0].Env, "LONG=1") {
		t.Fatalf("sessions recorded after a long freeze: %+v", info.Sessions)
	}
}
