package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
)

// TestSnapshotPending: a named snapshot answered before its publication
// ended is this engine's already: a fork from it, a create on its image,
// a listing, a second snapshot of the name and a delete wait for it or
// see it; WaitSnapshot returns once it is durable.
func TestSnapshotPending(t *testing.T) {
	ctx := context.Background()
	e := snapshotEngine(t)
	s, err := e.CreateSandbox(ctx, SandboxRequest{HostBase: true})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, s)
	sh(t, s, "", "mkdir -p /data && head -c 3000000 /dev/urandom >/data/big && echo one >/data/one")
	held := make(chan struct{})
	testHookPublish = func() { <-held }
	t.Cleanup(func() { testHookPublish = func() {} })
	info, err := e.Snapshot(ctx, s.ID(), api.SnapshotRequest{Name: "pending"})
	if err != nil {
		t.Fatal(err)
	}
	if info.Layer == "" || info.Files < 2 {
		t.Fatalf("answer %+v", info)
	}
	if _, err := e.Snapshot(ctx, s.ID(), api.SnapshotRequest{Name: "pending"}); !errors.Is(err, ErrSnapshotExists) {
		t.Fatalf("a second snapshot of a pending name: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := e.WaitSnapshot(wctx, "pending"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitSnapshot while held: %v", err)
	}
	type forked struct {
		kids []*Sandbox
		err  error
	}
	fork := make(chan forked, 2)
	go func() {
		kids, err := e.Fork(ctx, s.ID(), api.ForkRequest{Snapshot: "pending"})
		fork <- forked{kids, err}
	}()
	go func() { // as the E2B front end resumes a paused sandbox
		c, err := e.CreateSandbox(ctx, SandboxRequest{Image: "snapshot/pending"})
		fork <- forked{[]*Sandbox{c}, err}
	}()
	select {
	case f := <-fork:
		t.Fatalf("a fork or create from the pending snapshot did not wait for it: %v", f.err)
	case <-time.After(100 * time.Millisecond):
	}
	close(held)
	for range 2 {
		f := <-fork
		if f.err != nil {
			t.Fatal(f.err)
		}
		closeAll(t, f.kids...)
		if got := sh(t, f.kids[0], "", "cat /data/one; wc -c </data/big"); got != "one\n3000000\n" {
			t.Fatalf("the child of the pending snapshot reads %q", got)
		}
	}
	if err := e.WaitSnapshot(ctx, "pending"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cache.st().Ref("snapshot/pending"); err != nil {
		t.Fatalf("the ref after WaitSnapshot: %v", err)
	}
	list, err := e.Snapshots()
	if i := slices.IndexFunc(list, func(x api.SnapshotInfo) bool { return x.Name == "pending" }); err != nil || i < 0 || list[i].Layer != info.Layer {
		t.Fatalf("listing %+v %v", list, err)
	}
	if err := e.DeleteSnapshot("pending"); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotKilledPending: msb killed (SIGKILL) once a named snapshot
// answered, its publication held before the store's barriers ("held") or
// left to run ("running"), leaves nothing wrong: the cache verifies
// before and after a gc, and the name is absent or whole (a fork from it
// reads what the sandbox wrote); killed once WaitSnapshot returned
// ("waited"), the name is there.
func TestSnapshotKilledPending(t *testing.T) {
	if os.Getenv(pendingChildEnv) != "" {
		pendingChild(t)
		return
	}
	privtest.RequireRoot(t)
	for _, mode := range []string{"held", "running", "waited"} {
		t.Run(mode, func(t *testing.T) {
			state, cache := privtest.StateDir(t), t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestSnapshotKilledPending$", "-test.count=1")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:%s:%s", pendingChildEnv, state, cache, mode))
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
			if len(f) != 2 || f[0] != "answered" {
				t.Fatalf("the child said %q", line)
			}
			e, err := Open(context.Background(), Config{StateDir: state, Cache: CacheConfig{Dir: cache}})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			ctx := context.Background()
			for _, gc := range []bool{false, true} {
				if gc {
					if _, err := e.cache.GC(ctx); err != nil {
						t.Fatal(err)
					}
				}
				if rep, err := e.cache.Verify(ctx); err != nil || !rep.OK {
					t.Fatalf("verify (after gc %v): %+v %v", gc, rep, err)
				}
			}
			list, err := e.Snapshots()
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case len(list) == 0 && mode != "waited":
				t.Logf("%s: no name", mode)
				return
			case len(list) != 0 && mode == "held":
				t.Fatalf("a snapshot whose publication was held before its barriers is listed: %+v", list)
			case len(list) != 1 || list[0].Layer != f[1]:
				t.Fatalf("listing %+v, want one of layer %s", list, f[1])
			}
			kids, err := e.Fork(ctx, "", api.ForkRequest{Snapshot: "killed"})
			if err != nil {
				t.Fatal(err)
			}
			defer kids[0].Close()
			if got := sh(t, kids[0], "", "cat /data/one; wc -c </data/big"); got != "one\n3000000\n" {
				t.Fatalf("the child of the surviving snapshot reads %q", got)
			}
		})
	}
}

// pendingChildEnv holds, in the child of TestSnapshotKilledPending, its
// state and cache dirs and its mode (see there).
const pendingChildEnv = "MSB_TEST_PENDING_CHILD"

// pendingChild creates a sandbox that writes, snapshots it and prints
// the answer's layer, then waits to be killed.
func pendingChild(t *testing.T) {
	f := strings.Split(os.Getenv(pendingChildEnv), ":")
	ctx := context.Background()
	e, err := Open(ctx, Config{StateDir: f[0], Cache: CacheConfig{Dir: f[1]}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.CreateSandbox(ctx, SandboxRequest{HostBase: true})
	if err != nil {
		t.Fatal(err)
	}
	sh(t, s, "", "mkdir -p /data && head -c 3000000 /dev/urandom >/data/big && echo one >/data/one")
	if f[2] == "held" {
		testHookPublish = func() { select {} }
	}
	info, err := e.Snapshot(ctx, s.ID(), api.SnapshotRequest{Name: "killed"})
	if err != nil {
		t.Fatal(err)
	}
	if f[2] == "waited" {
		if err := e.WaitSnapshot(ctx, "killed"); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Printf("answered %s\n", info.Layer)
	select {}
}

// TestSnapshotPanicEndsReservation: a named snapshot that panics before
// its publication is handed on leaves its name free: a wait for it
// returns, and the name can be taken again.
func TestSnapshotPanicEndsReservation(t *testing.T) {
	ctx := context.Background()
	e := snapshotEngine(t)
	s := hostSandbox(t, e)
	testHookFrozen = func(*sandbox.Sandbox) { panic("in the freeze") }
	t.Cleanup(func() { testHookFrozen = func(*sandbox.Sandbox) {} })
	func() {
		defer func() {
			if p := recover(); p != "in the freeze" {
				t.Fatalf("recovered %v, want the hook's panic", p)
			}
		}()
		e.Snapshot(ctx, s.ID(), api.SnapshotRequest{Name: "panicked"})
	}()
	testHookFrozen = func(*sandbox.Sandbox) {}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := e.WaitSnapshot(wctx, "panicked"); errors.Is(err, context.DeadlineExceeded) {
		// The engine's close, in the test's cleanup, would wait for ever.
		fmt.Fprintf(os.Stderr, "--- FAIL: %s: the name stays reserved after the panic\n", t.Name())
		os.Exit(1)
	}
	again := make(chan error, 1)
	go func() {
		_, err := e.Snapshot(ctx, s.ID(), api.SnapshotRequest{Name: "panicked"})
		if err == nil {
			err = e.WaitSnapshot(ctx, "panicked")
		}
		again <- err
	}()
	select {
	case err := <-again:
		if err != nil {
			t.Fatalf("the name again: %v", err)
		}
	case <-time.After(time.Minute):
		fmt.Fprintf(os.Stderr, "--- FAIL: %s: the sandbox stays locked after the panic\n", t.Name())
		os.Exit(1)
	}
}
