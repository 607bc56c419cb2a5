package engine

import (
	"context"
	"slices"
	"testing"

	"github.com/minisandbox/msb/internal/api"
)

// TestSnapshotForkSessions forks a raw sandbox with two sessions, the
// first (by name) in a directory deleted after it moved there: children
// started once the snapshot is taken (more than start beside it, and
// those of the named snapshot) have both sessions, each with its
// variables and in its directory, the first in the sandbox's default
// directory (its create could not open it there and opened none).
func TestSnapshotForkSessions(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	parent := hostSandbox(t, e)
	for _, n := range []string{"a", "b"} {
		if err := parent.OpenSession(ctx, api.SessionRequest{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	sh(t, parent, "a", "mkdir -p /tmp/gone && cd /tmp/gone && export A=1")
	sh(t, parent, "b", "mkdir -p /tmp/kept && cd /tmp/kept && export B='2 x'")
	sh(t, parent, "b", "rmdir /tmp/gone")
	home := sh(t, parent, "", "pwd")
	check := func(t *testing.T, kids []*Sandbox) {
		t.Helper()
		for _, k := range kids {
			if got := k.Info().Sessions; !slices.Equal(got, []string{"a", "b"}) {
				t.Fatalf("child %s's sessions: %q", k.ID(), got)
			}
			if got := sh(t, k, "a", `echo "$PWD|${A-}|${B-}"`); got != home[:len(home)-1]+"|1|\n" {
				t.Errorf("child %s's session a: %q", k.ID(), got)
			}
			if got := sh(t, k, "b", `echo "$PWD|${A-}|${B-}"`); got != "/tmp/kept||2 x\n" {
				t.Errorf("child %s's session b: %q", k.ID(), got)
			}
		}
	}
	kids, err := e.Fork(ctx, parent.ID(), api.ForkRequest{Count: int(maxBeside) + 2})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, kids...)
	check(t, kids)
	if _, err := e.Snapshot(ctx, parent.ID(), api.SnapshotRequest{Name: "sessions"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.DeleteSnapshot("sessions") })
	sh(t, parent, "b", "mkdir -p /tmp/gone")
	kids, err = e.Fork(ctx, parent.ID(), api.ForkRequest{Count: 1, Snapshot: "sessions"})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, kids...)
	check(t, kids)
	// The directory back, the first session opens in it.
	if _, err := e.Snapshot(ctx, parent.ID(), api.SnapshotRequest{Name: "sessions2"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.DeleteSnapshot("sessions2") })
	kids, err = e.Fork(ctx, "", api.ForkRequest{Count: 1, Snapshot: "sessions2"})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, kids...)
	if got := sh(t, kids[0], "a", `echo "$PWD|${A-}"`); got != "/tmp/gone|1\n" {
		t.Errorf("child of the snapshot alone, session a: %q", got)
	}
}
