package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
)

// TestSnapshotProcessesBusy takes a snapshot with processes (E2B's pause)
// of a sandbox whose shell loops start a sleep after another, 12 times:
// each is taken. A freeze catches a loop's dash between its vfork and
// its child's exec at times; criu, seizing both frozen, waited for the
// parent until its 10 s timeout ("Unseizable non-zombie ... state D"),
// 10 of 60 here before checkpoint.FreezeForDump.
func TestSnapshotProcessesBusy(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	parent, _, _ := counterParent(t, e)
	sh(t, parent, "bg", `for i in 1 2 3 4 5 6 7 8; do setsid sh -c 'while :; do sleep 0.01; done' </dev/null >/dev/null 2>&1 & done; sleep 0.2`)
	for i := range 12 {
		name := fmt.Sprintf("busy-%d", i)
		t0 := time.Now()
		if _, err := e.SnapshotProcesses(ctx, parent.ID(), api.SnapshotRequest{Name: name}); err != nil {
			t.Fatalf("snapshot %d with processes, after %v: %v", i+1, time.Since(t0).Round(time.Millisecond), err)
		}
		if err := e.DeleteSnapshot(name); err != nil {
			t.Fatal(err)
		}
	}
}
