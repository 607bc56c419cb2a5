package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
)

// TestForkKeepsMtimes: a fork's child and a named snapshot's sees the
// modification times the parent's files had, also for two files of one
// content and different times, and for a file whose content the store
// already holds (the shared object's time is not the file's). Build
// tools that compare times (make, cargo) otherwise skip a changed
// source whose content the cache had seen older.
func TestForkKeepsMtimes(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	parent := hostSandbox(t, e)
	sh(t, parent, "", `mkdir -p /tmp/m && cd /tmp/m && echo same > a && echo same > b && echo same > c &&
		touch -d @1000000001 a && touch -d @1200000002 b && touch -d @1600000003 c`)
	// The content "same\n" is in the store before the fork: a first
	// snapshot holds it with other times.
	sh(t, parent, "", "echo same > /tmp/first && touch -d @900000000 /tmp/first")
	if _, err := e.Snapshot(ctx, parent.ID(), api.SnapshotRequest{Name: "first"}); err != nil {
		t.Fatal(err)
	}
	if err := e.WaitSnapshot(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	sh(t, parent, "", "rm /tmp/first")
	const want = "a 1000000001\nb 1200000002\nc 1600000003\n"
	stat := `cd /tmp/m && for f in a b c; do echo "$f $(stat -c %Y $f)"; done`
	kids, err := e.Fork(ctx, parent.ID(), api.ForkRequest{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, kids...)
	if got := sh(t, kids[0], "", stat); got != want {
		t.Errorf("a fork's child sees times\n%s, want\n%s", got, want)
	}
	if _, err := e.Snapshot(ctx, parent.ID(), api.SnapshotRequest{Name: "second"}); err != nil {
		t.Fatal(err)
	}
	kids, err = e.ForkSnapshot(ctx, "", api.ForkRequest{Snapshot: "second"}, SnapshotForkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, kids...)
	if got := sh(t, kids[0], "", stat); got != want {
		t.Errorf("a named snapshot's child sees times\n%s, want\n%s", got, want)
	}
	if got := sh(t, kids[0], "", "cat /tmp/m/a /tmp/m/c"); strings.Count(got, "same") != 2 {
		t.Errorf("the child's files hold %q", got)
	}
}
