package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/client"
	"github.com/minisandbox/msb/internal/engine"
)

// sh runs command in a fresh bash of sandbox id and returns its output; a
// non-zero exit fails the test.
func sh(t *testing.T, c *client.Client, id, command string) string {
	t.Helper()
	res, err := c.Exec(context.Background(), id, api.ExecRequest{Command: command})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s in %s: %v %+v", command, id, err, res)
	}
	return res.Stdout
}

// inSession runs command in session name of sandbox id.
func inSession(t *testing.T, c *client.Client, id, name, command string) string {
	t.Helper()
	res, err := c.Exec(context.Background(), id, api.ExecRequest{Session: name, Command: command})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s in session %s of %s: %v %+v", command, name, id, err, res)
	}
	return res.Stdout
}

// state says which of the test's marker files a sandbox has, and whether
// the file the test deleted is there.
const state = `cd /testbed && for f in before.txt after.txt child.txt calc/text.py; do test -e $f && printf '%s ' $f; done; echo`

// TestServerSnapshots drives snapshot, fork and rollback through the
// routes: a task sandbox with a session writes and deletes files; its
// snapshot and its forks keep the state they were taken at (a deleted file
// stays deleted), children are isolated from the parent and each other,
// sessions come back in their cwd with their variables, rollback returns
// to a snapshot and to the start in place, a named snapshot outlives its
// sandbox, and the errors are the API's.
func TestServerSnapshots(t *testing.T) {
	d := startDaemon(t, nil, nil)
	ctx := context.Background()
	c := d.unix
	in := generated(t).Instances[0]
	parent, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{InstanceID: in.InstanceID, Labels: map[string]string{"job": "snap"}})
	if err != nil {
		t.Fatal(err)
	}
	id := parent.ID
	if err := c.OpenSession(ctx, id, api.SessionRequest{Name: "main"}); err != nil {
		t.Fatal(err)
	}
	inSession(t, c, id, "main", "cd /testbed/calc && export STEP=1")
	sh(t, c, id, "echo 1 > /testbed/before.txt && rm /testbed/calc/text.py")

	snap, err := c.Snapshot(ctx, id, api.SnapshotRequest{Name: "snap-step1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteSnapshot(context.Background(), "snap-step1") })
	if snap.Name != "snap-step1" || snap.Sandbox != id || snap.InstanceID != in.InstanceID || snap.Layer == "" || snap.Files == 0 {
		t.Fatalf("snapshot %+v", snap)
	}
	if !hasSession(snap.Sessions, "main", "/testbed/calc", "STEP=1") {
		t.Fatalf("the snapshot's sessions %+v", snap.Sessions)
	}
	list, err := c.Snapshots(ctx)
	if err != nil || !hasSnapshot(list, "snap-step1") {
		t.Fatalf("snapshots %v %+v", err, list)
	}
	wantCode(t, second(c.Snapshot(ctx, id, api.SnapshotRequest{Name: "snap-step1"})), api.CodeConflict)

	// The parent goes on; forks of its live state have what it has now.
	sh(t, c, id, "echo 2 > /testbed/after.txt")
	kids, err := c.Fork(ctx, id, api.ForkRequest{Count: 2, Labels: map[string]string{"branch": "yes"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		t.Cleanup(func() { c.DeleteSandbox(context.Background(), k.ID) })
	}
	if len(kids) != 2 || kids[0].ID == kids[1].ID || kids[0].ID == id {
		t.Fatalf("fork %+v", kids)
	}
	for _, k := range kids {
		if k.InstanceID != in.InstanceID || k.Labels["job"] != "snap" || k.Labels["branch"] != "yes" || k.State != api.SandboxRunning {
			t.Fatalf("child %+v", k)
		}
		if got := sh(t, c, k.ID, state); got != "before.txt after.txt \n" {
			t.Fatalf("child %s has %q", k.ID, got)
		}
		if got := inSession(t, c, k.ID, "main", `echo "$PWD $STEP"`); got != "/testbed/calc 1\n" {
			t.Fatalf("child %s's session: %q", k.ID, got)
		}
	}
	sh(t, c, kids[0].ID, "echo c > /testbed/child.txt")
	for _, other := range []string{id, kids[1].ID} {
		if got := sh(t, c, other, state); got != "before.txt after.txt \n" {
			t.Fatalf("a child's write is seen by %s: %q", other, got)
		}
	}

	// A fork of the named snapshot has the state it was taken at.
	old, err := c.Fork(ctx, id, api.ForkRequest{Snapshot: "snap-step1"})
	if err != nil || len(old) != 1 {
		t.Fatalf("fork of the snapshot %v %+v", err, old)
	}
	t.Cleanup(func() { c.DeleteSandbox(context.Background(), old[0].ID) })
	if got := sh(t, c, old[0].ID, state); got != "before.txt \n" {
		t.Fatalf("fork of snap-step1 has %q", got)
	}

	// Rollback in place: to the snapshot, then to the start.
	inSession(t, c, id, "main", "cd / && export STEP=2")
	info, err := c.Rollback(ctx, id, api.RollbackRequest{Snapshot: "snap-step1"})
	if err != nil || info.ID != id || info.State != api.SandboxRunning {
		t.Fatalf("rollback %v %+v", err, info)
	}
	if got := sh(t, c, id, state); got != "before.txt \n" {
		t.Fatalf("after rollback to snap-step1: %q", got)
	}
	if got := inSession(t, c, id, "main", `echo "$PWD $STEP"`); got != "/testbed/calc 1\n" {
		t.Fatalf("the session after rollback: %q", got)
	}
	if _, err := c.Rollback(ctx, id, api.RollbackRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, c, id, state); got != "calc/text.py \n" {
		t.Fatalf("after rollback to the start: %q", got)
	}

	// The named snapshot outlives its sandbox.
	if _, err := c.DeleteSandbox(ctx, id); err != nil {
		t.Fatal(err)
	}
	orphan, err := c.ForkSnapshot(ctx, "snap-step1", api.ForkRequest{})
	if err != nil || len(orphan) != 1 {
		t.Fatalf("fork of a closed sandbox's snapshot %v %+v", err, orphan)
	}
	t.Cleanup(func() { c.DeleteSandbox(context.Background(), orphan[0].ID) })
	if got := sh(t, c, orphan[0].ID, state); got != "before.txt \n" {
		t.Fatalf("fork of snap-step1 after its sandbox closed has %q", got)
	}

	// Errors.
	wantCode(t, second(c.Snapshot(ctx, id, api.SnapshotRequest{})), api.CodeGone)
	wantCode(t, second(c.Snapshot(ctx, "sb-none", api.SnapshotRequest{})), api.CodeNotFound)
	wantCode(t, second(c.Fork(ctx, kids[1].ID, api.ForkRequest{Count: -1})), api.CodeBadRequest)
	wantCode(t, second(c.Fork(ctx, kids[1].ID, api.ForkRequest{Count: engine.MaxForkCount + 1})), api.CodeBadRequest)
	wantCode(t, second(c.Fork(ctx, kids[1].ID, api.ForkRequest{Processes: "criu"})), api.CodeBadRequest)
	wantCode(t, second(c.Fork(ctx, kids[1].ID, api.ForkRequest{Snapshot: "snap-none"})), api.CodeNotFound)
	wantCode(t, second(c.ForkSnapshot(ctx, "snap-step1", api.ForkRequest{Snapshot: "other"})), api.CodeBadRequest)
	wantCode(t, second(c.Rollback(ctx, kids[1].ID, api.RollbackRequest{Snapshot: "snap-none"})), api.CodeNotFound)
	wantCode(t, c.DeleteSnapshot(ctx, "snap-none"), api.CodeNotFound)
	if st, b := raw(t, http.DefaultClient, "POST", d.tcp+"/v1/sandboxes/"+kids[1].ID+"/fork", testToken, `{"count": "2"}`); st != 400 || errCode(b) != api.CodeBadRequest {
		t.Fatalf("a count that is a string: %d %s", st, b)
	}

	if err := c.DeleteSnapshot(ctx, "snap-step1"); err != nil {
		t.Fatal(err)
	}
	if list, err := c.Snapshots(ctx); err != nil || hasSnapshot(list, "snap-step1") {
		t.Fatalf("after delete %v %+v", err, list)
	}
	// Its children keep running on its layer.
	if got := sh(t, c, old[0].ID, state); got != "before.txt \n" {
		t.Fatalf("a fork of a deleted snapshot has %q", got)
	}
}

func second[T any](_ T, err error) error { return err }

func hasSnapshot(list []api.SnapshotInfo, name string) bool {
	for _, s := range list {
		if s.Name == name {
			return true
		}
	}
	return false
}

func hasSession(ss []api.SnapshotSession, name, cwd, env string) bool {
	for _, s := range ss {
		if s.Name == name && s.Cwd == cwd && strings.Contains("\n"+strings.Join(s.Env, "\n")+"\n", "\n"+env+"\n") {
			return true
		}
	}
	return false
}
