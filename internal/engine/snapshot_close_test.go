package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/rootfs"
)

// TestSnapshotCloseKeepsAnswered: a named snapshot answered while Close
// waits for the ones pending is waited for too (a stopping daemon keeps
// what it answered), or refused with ErrClosed: Close never returns with
// one answered and not published.
func TestSnapshotCloseKeepsAnswered(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	a := hostSandbox(t, e)
	b := hostSandbox(t, e)
	sh(t, b, "", "echo b >/tmp/who")
	first := fmt.Sprintf("close1-%d-%d", os.Getpid(), time.Now().UnixNano())
	second := fmt.Sprintf("close2-%d-%d", os.Getpid(), time.Now().UnixNano())
	held1, held2 := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	testHookPublish = func() {
		if calls.Add(1) == 1 {
			<-held1
			return
		}
		select { // a second one that Close waits for is let go, late
		case <-held2:
		case <-time.After(5 * time.Second):
		}
	}
	t.Cleanup(func() { testHookPublish = func() {} })
	if _, err := e.Snapshot(ctx, a.ID(), api.SnapshotRequest{Name: first}); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- e.Close() }()
	for e.open() == nil {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // Close is in waitAll, held by first
	_, err := e.Snapshot(ctx, b.ID(), api.SnapshotRequest{Name: second})
	answered := err == nil
	if err != nil && !errors.Is(err, ErrClosed) {
		t.Errorf("a snapshot while the engine closes: %v, want it answered or ErrClosed", err)
	}
	close(held1)
	if err := <-closed; err != nil {
		t.Error(err)
	}
	asked, cancel := context.WithCancel(ctx)
	cancel() // asks whether it is pending, without waiting
	pending := errors.Is(e.WaitSnapshot(asked, second), context.Canceled)
	close(held2)
	e.waitSnapshots()
	if answered && pending {
		t.Errorf("Close returned with snapshot %q answered and not published", second)
	}
	st := e.cache.st()
	for _, n := range []string{first, second} {
		if _, err := st.Ref(rootfs.SnapshotRef(n)); err == nil {
			st.DeleteRef(rootfs.SnapshotRef(n))
		}
	}
}
