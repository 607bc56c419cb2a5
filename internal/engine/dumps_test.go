package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/privtest"
	"golang.org/x/sys/unix"
)

// TestCacheGCSweepsDumps: the cache's gc (msb cache gc) removes the kept
// dumps whose snapshots are gone and those of snapshot calls that died
// halfway (.new-*, an hour old), and keeps a named snapshot's dump and a
// dump being written.
func TestCacheGCSweepsDumps(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	parent := hostSandbox(t, e)
	if _, err := e.Snapshot(ctx, parent.ID(), api.SnapshotRequest{Name: "kept"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.DeleteSnapshot("kept") })
	gone, died := plantDump(t, e, "gone", 0), plantDump(t, e, ".new-died", 2*time.Hour)
	kept, writing := plantDump(t, e, "kept", 0), plantDump(t, e, ".new-writing", 0)
	if _, err := e.cache.GC(ctx); err != nil {
		t.Fatal(err)
	}
	wantDumps(t, "after cache gc", []string{gone, died}, []string{kept, writing})
}

// TestDeleteSweepsDump: deleting a snapshot removes its dump at once
// when no fork restores from it; one a fork holds (its lock, as a
// restore takes it) stays until the fork let go, and cache gc then
// removes it.
func TestDeleteSweepsDump(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	parent := hostSandbox(t, e)
	for _, name := range []string{"swept", "held"} {
		if _, err := e.Snapshot(ctx, parent.ID(), api.SnapshotRequest{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	swept, held := plantDump(t, e, "swept", 0), plantDump(t, e, "held", 0)
	unlock, err := lockDump(held, unix.LOCK_SH)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"swept", "held"} {
		if err := e.DeleteSnapshot(name); err != nil {
			t.Fatal(err)
		}
	}
	wantDumps(t, "after the deletes", []string{swept}, []string{held})
	if _, err := e.cache.GC(ctx); err != nil {
		t.Fatal(err)
	}
	wantDumps(t, "after cache gc, held", nil, []string{held})
	unlock()
	if _, err := e.cache.GC(ctx); err != nil {
		t.Fatal(err)
	}
	wantDumps(t, "after cache gc, let go", []string{held}, nil)
}

// plantDump makes a dump dir name in the cache's dumps, age old, holding
// a file.
func plantDump(t *testing.T, e *Engine, name string, age time.Duration) string {
	t.Helper()
	dir := e.dumpDir(name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pages-1.img"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-age)
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	return dir
}

// wantDumps checks that the dump dirs gone are gone and those kept are
// whole (plantDump's file in them).
func wantDumps(t *testing.T, when string, gone, kept []string) {
	t.Helper()
	for _, d := range gone {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s %s: %v, want it removed", d, when, err)
		}
	}
	for _, d := range kept {
		if _, err := os.Stat(filepath.Join(d, "pages-1.img")); err != nil {
			t.Errorf("%s %s: %v, want it kept", d, when, err)
		}
	}
}

// TestDumpDeletedWhileForked deletes a snapshot with processes while a
// fork of it restores its dump, and sweeps the dumps (what any call with
// processes and the cache's gc do): the fork, which holds the snapshot,
// must not lose the dump halfway; each child goes on with the counter.
func TestDumpDeletedWhileForked(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	parent, token, before := counterParent(t, e)
	if _, err := e.SnapshotProcesses(ctx, parent.ID(), api.SnapshotRequest{Name: "racing"}); err != nil {
		t.Fatal(err)
	}
	if err := parent.Close(); err != nil {
		t.Fatal(err)
	}
	type result struct {
		kids []*Sandbox
		err  error
	}
	done := make(chan result, 1)
	go func() {
		kids, err := e.Fork(ctx, "", api.ForkRequest{Snapshot: "racing", Count: 3, Processes: api.ForkProcessesAll})
		done <- result{kids, err}
	}()
	// Once criu restores a child, the snapshot is deleted and the dumps
	// swept under it.
	swept := false
	var res result
	for res.kids == nil && res.err == nil {
		select {
		case res = <-done:
			continue
		case <-time.After(2 * time.Millisecond):
		}
		if !swept && criuRunning("restore") {
			if err := e.DeleteSnapshot("racing"); err != nil {
				t.Error(err)
			}
			e.sweepDumps()
			e.cache.GC(ctx)
			swept = true
		}
	}
	if res.err != nil {
		t.Fatalf("a fork whose snapshot was deleted while it restored: %v", res.err)
	}
	closeAll(t, res.kids...)
	if !swept {
		t.Fatal("the fork ended before a child's state dir was seen: nothing raced")
	}
	for _, k := range res.kids {
		if tok, n := readCounter(t, k, before); tok != token {
			t.Errorf("%s: the counter's token %q at %d, want %q past %d", k.ID(), tok, n, token, before)
		}
	}
	e.cache.GC(ctx)
	if _, err := os.Stat(e.dumpDir("racing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dump of the deleted snapshot after the fork and a cache gc: %v, want it gone", err)
	}
}

// criuRunning says whether a criu of the command verb (dump, restore)
// runs as a child of this process.
func criuRunning(verb string) bool {
	self := strconv.Itoa(os.Getpid())
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		cmdline, err := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) < 2 || filepath.Base(args[0]) != "criu" || args[1] != verb {
			continue
		}
		if stat, err := os.ReadFile("/proc/" + p.Name() + "/stat"); err == nil {
			s := string(stat)
			if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 1 && f[1] == self {
				return true
			}
		}
	}
	return false
}

// counterParent is a root sandbox whose session "bg" runs the counter
// (counterStart) in /tmp, read past 3: its token and count. Rootless
// (processes are refused: TestForkProcesses) or without criu it skips.
func counterParent(t *testing.T, e *Engine) (parent *Sandbox, token string, n int) {
	t.Helper()
	if e.rt.Rootless() {
		t.Skip("rootless refuses processes (TestForkProcesses)")
	}
	if _, err := findCriu(); err != nil {
		privtest.Skip(t, "%v", err)
	}
	parent = dumpableSandbox(t, e)
	if err := parent.OpenSession(context.Background(), api.SessionRequest{Name: "bg"}); err != nil {
		t.Fatal(err)
	}
	sh(t, parent, "bg", "cd /tmp; "+counterStart)
	token, n = readCounter(t, parent, 3)
	return parent, token, n
}

// forkCancelledIn runs fork, cancelling its ctx delay after a criu of
// verb (dump, restore) is seen running as this process's child, closes
// the children it made, and returns its error.
func forkCancelledIn(verb string, delay time.Duration, fork func(context.Context) ([]*Sandbox, error)) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		kids, err := fork(ctx)
		for _, k := range kids {
			k.Close()
		}
		done <- err
	}()
	for {
		select {
		case err := <-done:
			return err
		case <-time.After(2 * time.Millisecond):
		}
		if criuRunning(verb) {
			time.Sleep(delay)
			cancel()
		}
	}
}

// TestForkCancelledInDump cancels a fork with processes while criu dumps
// the parent (a client gone): the fork fails, and the parent's processes
// must go on unharmed, thawed, as if it had not been asked.
func TestForkCancelledInDump(t *testing.T) {
	e := snapshotEngine(t)
	parent, token, n := counterParent(t, e)
	for try := range 8 {
		err := forkCancelledIn("dump", time.Duration(try)*60*time.Millisecond, func(ctx context.Context) ([]*Sandbox, error) {
			return e.Fork(ctx, parent.ID(), api.ForkRequest{Count: 1, Processes: api.ForkProcessesAll})
		})
		t.Logf("try %d: the fork: %v", try, err)
		tok, m := readCounter(t, parent, n)
		if tok != token {
			t.Fatalf("try %d: the parent's counter has token %q, want %q", try, tok, token)
		}
		n = m
		if got := sh(t, parent, "bg", "echo alive"); got != "alive\n" {
			t.Fatalf("try %d: the parent's session after the cancelled fork: %q", try, got)
		}
	}
}

// TestForkCancelledInRestore cancels a fork of a snapshot with processes
// while criu restores its child: the fork fails and leaves nothing, no
// process of the half-restored child either (a zombie counts: the
// restored init is a child of this process, criu --restore-sibling).
// It found a hang (the fork waited forever on criu's output pipe, held
// by its leftovers: checkpoint's Criu.run), a zombie per cancelled
// restore (sandbox's reapHalfRestored) and criu's cgroup yard
// (.criu.cgyard.*) left mounted in the dump dir (checkpoint's
// removeWork, with the yard in the restore's work dir).
func TestForkCancelledInRestore(t *testing.T) {
	e := snapshotEngine(t)
	parent, _, _ := counterParent(t, e)
	if _, err := e.SnapshotProcesses(context.Background(), parent.ID(), api.SnapshotRequest{Name: "cut"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.DeleteSnapshot("cut") })
	before := childPids(t)
	for try := range 8 {
		err := forkCancelledIn("restore", time.Duration(try)*40*time.Millisecond, func(ctx context.Context) ([]*Sandbox, error) {
			return e.Fork(ctx, "", api.ForkRequest{Snapshot: "cut", Processes: api.ForkProcessesAll})
		})
		t.Logf("try %d: the fork: %v", try, err)
		if err != nil && strings.Contains(err.Error(), "whole log kept") {
			t.Errorf("try %d: a cancelled restore kept its log (it says nothing wrong): %v", try, err)
		}
	}
	time.Sleep(500 * time.Millisecond) // closes' cleanups
	for pid, what := range childPids(t) {
		if _, ok := before[pid]; !ok {
			t.Errorf("a child process left by the cancelled forks: %d %s", pid, what)
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(string(mi), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], e.cache.Dir()+"/") {
			t.Errorf("a mount left in the cache by the cancelled forks: %s", f[4])
		}
	}
}

// childPids are the processes whose parent is this one, with their
// state and command line.
func childPids(t *testing.T) map[int]string {
	t.Helper()
	self := strconv.Itoa(os.Getpid())
	out := map[int]string{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + p.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == self {
			cmdline, _ := os.ReadFile("/proc/" + p.Name() + "/cmdline")
			out[pid] = f[0] + " " + s[:strings.LastIndexByte(s, ')')+1] + " " + strings.ReplaceAll(string(cmdline), "\x00", " ")
		}
	}
	return out
}
