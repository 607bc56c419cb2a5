package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/warm"
)

// TestEngineForkEarly: a fork's children (started beside the snapshot, or
// spares reset onto it) answer their first command while the snapshot's
// commit is held before it puts the layer in its place (root mode: they
// mount its early tree); meanwhile a child's own snapshot waits for the
// layer. Once it is published, the children run on the layer's place
// (their config names it), hold a lease of it (gc keeps it), and can be
// snapshotted, forked and rolled back to creation. Rootless, the
// children wait for the commit (the hold is passed first).
func TestEngineForkEarly(t *testing.T) {
	for _, spares := range []int{0, 2} {
		t.Run(fmt.Sprintf("spares-%d", spares), func(t *testing.T) {
			var e *Engine
			t.Cleanup(func() {
				if err := privtest.CheckLeaks(e.cfg.StateDir); err != nil {
					t.Error(err)
				}
			})
			e = openEngine(t, "", func(c *Config) { c.Spares = spares })
			ctx := context.Background()
			parent := hostSandbox(t, e)
			if err := parent.OpenSession(ctx, api.SessionRequest{Name: "main"}); err != nil {
				t.Fatal(err)
			}
			sh(t, parent, "main", "mkdir -p /w && cd /w && head -c 3000000 /dev/urandom > big && echo one > f && export STEP=1")
			if spares > 0 { // the first fork leaves spares of its children's shape
				first, err := e.Fork(ctx, parent.ID(), api.ForkRequest{})
				if err != nil {
					t.Fatal(err)
				}
				closeAll(t, first...)
				waitPool(t, e, PoolFork, "1 ready", func(st warm.Stats) bool { return st.Spares >= 1 && st.Making == 0 })
			}
			sh(t, parent, "main", "echo two > f && export STEP=2")
			held, release := holdAt(t, &testHookPlace)
			defer release()
			rootless := e.rt.Rootless()
			if rootless {
				release()
			}
			kids, err := e.Fork(ctx, parent.ID(), api.ForkRequest{Count: 1})
			if err != nil {
				t.Fatal(err)
			}
			closeAll(t, kids...)
			if hits := e.PoolStats()[PoolFork].Hits; spares > 0 && hits != 1 {
				t.Fatalf("%d children from spares, want 1", hits)
			}
			k := kids[0]
			if got := sh(t, k, "main", `echo "$PWD $STEP"; cat f; md5sum <big`); got != "/w 2\ntwo\n"+sh(t, parent, "main", "md5sum <big") {
				t.Fatalf("child sees %q", got)
			}
			st := e.cache.st()
			k.stateMu.Lock() // a spare's config names the layer once hashed (forkspare.go)
			layers := k.sbox().Config().Layers
			k.stateMu.Unlock()
			ids, err := layersOf(st, layers)
			if err != nil {
				t.Fatal(err)
			}
			top := ids[len(ids)-1]
			snapped := make(chan error, 1)
			if !rootless {
				if st.Has(top) {
					t.Fatal("the child answered once the commit had put the layer in its place")
				}
				<-held // the commit is held, durable, its tree not in place
				go func() {
					_, err := e.Snapshot(ctx, k.ID(), api.SnapshotRequest{Name: "kid"})
					snapped <- err
				}()
				select {
				case err := <-snapped:
					t.Fatalf("the child's snapshot did not wait for the layer below it: %v", err)
				case <-time.After(200 * time.Millisecond):
				}
				release()
			} else {
				go func() {
					_, err := e.Snapshot(ctx, k.ID(), api.SnapshotRequest{Name: "kid"})
					snapped <- err
				}()
			}
			if err := <-snapped; err != nil {
				t.Fatalf("the child's snapshot: %v", err)
			}
			if !st.Has(top) {
				t.Fatalf("the child's layer %s is not in its place once published", top.Short())
			}
			grand, err := e.Fork(ctx, "", api.ForkRequest{Snapshot: "kid"})
			if err != nil {
				t.Fatal(err)
			}
			if got := sh(t, grand[0], "", "cat /w/f"); got != "two\n" {
				t.Fatalf("grandchild sees %q", got)
			}
			grand[0].Close()
			if err := e.DeleteSnapshot("kid"); err != nil {
				t.Fatal(err)
			}
			// The child's own lease keeps the layer once the fork settled.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				k.mu.Lock()
				leased := k.lease != nil && slices.Contains(k.lease.Layers, top)
				k.mu.Unlock()
				if leased {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the child holds no lease of its layer 10 s after the fork")
				}
			}
			sh(t, parent, "main", "echo three > f")
			if _, err := st.GC(ctx); err != nil {
				t.Fatal(err)
			}
			if got := sh(t, k, "main", "cat f"); got != "two\n" || !st.Has(top) {
				t.Fatalf("child after gc sees %q, its layer there: %v", got, st.Has(top))
			}
			sh(t, k, "main", "echo mine > /w/kid")
			if _, err := e.Rollback(ctx, k.ID(), api.RollbackRequest{}); err != nil {
				t.Fatal(err)
			}
			if got := sh(t, k, "main", "cat /w/f"); got != "two\n" {
				t.Fatalf("child rolled back to creation sees %q", got)
			}
			if _, err := k.Stat(ctx, "/w/kid"); !errors.Is(err, sandbox.ErrNotFound) {
				t.Fatalf("child rolled back still has its file: %v", err)
			}
		})
	}
}

// TestEngineForkBeforeHash: a child from a spare answers before its
// fork's layer is hashed (it runs on the early tree, built of what the
// freeze copied); until the layer is, what reads the child's layers (its
// snapshot, its rollback) waits, and then its config names the layer.
func TestEngineForkBeforeHash(t *testing.T) {
	var e *Engine
	t.Cleanup(func() {
		if err := privtest.CheckLeaks(e.cfg.StateDir); err != nil {
			t.Error(err)
		}
	})
	e = openEngine(t, "", func(c *Config) { c.Spares = 1 })
	if e.rt.Rootless() {
		t.Skip("rootless: a fork's children do not mount its early tree")
	}
	ctx := context.Background()
	parent := hostSandbox(t, e)
	sh(t, parent, "", "mkdir -p /w && echo one > /w/f")
	first, err := e.Fork(ctx, parent.ID(), api.ForkRequest{})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, first...)
	waitPool(t, e, PoolFork, "1 ready", func(st warm.Stats) bool { return st.Spares >= 1 && st.Making == 0 })
	sh(t, parent, "", "echo two > /w/f && head -c 2000000 /dev/urandom > /w/big")
	held, release := holdAt(t, &testHookHashed)
	defer release()
	kids, err := e.Fork(ctx, parent.ID(), api.ForkRequest{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, kids...)
	if hits := e.PoolStats()[PoolFork].Hits; hits != 1 {
		t.Fatalf("%d children from spares, want 1", hits)
	}
	k := kids[0]
	// The fork returned with the hash's end held (testHookHashed), so it
	// did not wait for it; under load the hash may still be running
	// when it returns: wait until it is held, so the child's snapshot and
	// rollback below meet a layer not yet hashed.
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("the fork's layer was never hashed")
	}
	if got := sh(t, k, "", "cat /w/f; md5sum </w/big"); got != "two\n"+sh(t, parent, "", "md5sum </w/big") {
		t.Fatalf("child sees %q", got)
	}
	waited := make(chan error, 2)
	go func() {
		_, err := e.Snapshot(ctx, k.ID(), api.SnapshotRequest{Name: "kid"})
		waited <- err
	}()
	go func() {
		_, err := e.Rollback(ctx, k.ID(), api.RollbackRequest{})
		waited <- err
	}()
	select {
	case err := <-waited:
		t.Fatalf("the child's snapshot or rollback did not wait for its layer to be hashed: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	release()
	for range 2 {
		if err := <-waited; err != nil {
			t.Fatal(err)
		}
	}
	ids, err := layersOf(e.cache.st(), k.sbox().Config().Layers)
	if err != nil {
		t.Fatal(err)
	}
	if got := sh(t, k, "", "cat /w/f"); got != "two\n" {
		t.Fatalf("child rolled back to creation sees %q (layers %v)", got, ids)
	}
	if err := e.DeleteSnapshot("kid"); err != nil {
		t.Fatal(err)
	}
}

// TestEngineForkEarlyNoLease: a child started on its fork's early tree
// holds no lease until the fork settles; should its lease then fail, it
// is closed (gc could remove the layers it runs on), and says why.
// Rootless, children lease what they mount: there is nothing to test.
func TestEngineForkEarlyNoLease(t *testing.T) {
	var e *Engine
	t.Cleanup(func() {
		if err := privtest.CheckLeaks(e.cfg.StateDir); err != nil {
			t.Error(err)
		}
	})
	e = openEngine(t, "", nil)
	if e.rt.Rootless() {
		t.Skip("rootless: a fork's children do not mount its early tree")
	}
	ctx := context.Background()
	parent := hostSandbox(t, e)
	sh(t, parent, "", "echo one > /f")
	hold := make(chan struct{})
	testHookPlace = func() { // the child mounts the early tree
		select {
		case <-hold:
		case <-time.After(time.Minute):
		}
	}
	testHookSettleLease = func() error { return errors.New("injected lease failure") }
	t.Cleanup(func() { testHookPlace, testHookSettleLease = func() {}, func() error { return nil } })
	kids, err := e.Fork(ctx, parent.ID(), api.ForkRequest{Count: 1})
	close(hold)
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, kids...)
	k := kids[0]
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		info, err := e.SandboxInfo(k.ID())
		if err != nil {
			t.Fatal(err)
		}
		if info.State == api.SandboxClosed {
			if !strings.Contains(info.Reason, "injected lease failure") {
				t.Fatalf("the child closed for %q", info.Reason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a child on the early tree without a lease is still up 10 s after the fork")
		}
	}
	if got := sh(t, parent, "", "cat /f"); got != "one\n" {
		t.Fatalf("parent sees %q", got)
	}
}

// holdAt makes *hook block the step it marks until release (or a minute:
// a step that waits for another does not hang the test), sending on held
// each time it is reached; the hook is a no-op again at the test's end.
func holdAt(t *testing.T, hook *func()) (held chan struct{}, release func()) {
	hold := make(chan struct{})
	held = make(chan struct{}, 1)
	*hook = func() {
		held <- struct{}{}
		select {
		case <-hold:
		case <-time.After(time.Minute):
		}
	}
	t.Cleanup(func() { *hook = func() {} })
	released := false
	return held, func() {
		if !released {
			released = true
			close(hold)
		}
	}
}

// TestHashHold: a fork's hash, held by the spares reset onto its tree,
// waits until each hold is let go (once or more), and no longer than
// maxHashHold for a hold never let go.
func TestHashHold(t *testing.T) {
	var h hashHold
	h.wait() // none taken: at once
	a, b := h.take(), h.take()
	waited := make(chan struct{})
	go func() { h.wait(); close(waited) }()
	a()
	a() // again: no effect
	select {
	case <-waited:
		t.Fatal("the hash went on with a hold taken")
	case <-time.After(20 * time.Millisecond):
	}
	b()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the hash still held once both holds were let go")
	}
	h.take() // never let go
	done := make(chan struct{})
	go func() { h.wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the hash still held %s after maxHashHold (%s)", 10*time.Second, maxHashHold)
	}
}
