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
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
)

// TestSnapshotProcessesPendingName: a snapshot with processes of a name
// that a snapshot of files is taking (frozen, its ref not reserved yet)
// is refused as existing, as a second snapshot of files is: else both
// publish the name and the later one's layer sits under the other's dump.
func TestSnapshotProcessesPendingName(t *testing.T) {
	e := snapshotEngine(t)
	if e.rt.Rootless() {
		t.Skip("processes are carried in root mode only")
	}
	if _, err := findCriu(); err != nil {
		privtest.Skip(t, "%v", err)
	}
	ctx := context.Background()
	a := hostSandbox(t, e)
	b := dumpableSandbox(t, e)
	sh(t, a, "", "echo a >/tmp/who")
	sh(t, b, "", "echo b >/tmp/who")
	name := fmt.Sprintf("race-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() {
		e.DeleteSnapshot(name)
		e.sweepDumps()
	})
	var once atomic.Bool
	procErr := make(chan error, 1)
	testHookFrozen = func(sb *sandbox.Sandbox) {
		if sb == a.sbox() && once.CompareAndSwap(false, true) {
			_, err := e.SnapshotProcesses(ctx, b.ID(), api.SnapshotRequest{Name: name})
			procErr <- err
		}
	}
	t.Cleanup(func() { testHookFrozen = func(*sandbox.Sandbox) {} })
	info, err := e.Snapshot(ctx, a.ID(), api.SnapshotRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.WaitSnapshot(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := <-procErr; !errors.Is(err, ErrSnapshotExists) {
		t.Errorf("a snapshot with processes of a name being taken: %v, want ErrSnapshotExists", err)
	}
	snap, err := e.loadSnapshot(ctx, name)
	if err != nil || snap.rec.Layer != info.Layer {
		t.Errorf("the name's layer %q %v, want the answered %s", snap.rec.Layer, err, info.Layer)
	}
	if _, err := os.Stat(e.dumpDir(name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dump kept for the snapshot of files: %v", err)
	}
}
