package server

import (
	"context"
	"slices"
	"testing"

	"github.com/minisandbox/msb/internal/api"
)

// TestServerCreateWithSession: a create that names a session opens it
// (one request instead of a create and a POST /sessions): the sandbox
// lists it, its shell keeps state between commands, and a second open of
// it conflicts; a name a session cannot have fails the create.
func TestServerCreateWithSession(t *testing.T) {
	d := startDaemon(t, nil, nil)
	ctx := context.Background()
	c := d.unix
	info, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Session: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSandbox(ctx, info.ID)
	if !slices.Equal(info.Sessions, []string{"agent"}) {
		t.Errorf("sessions of the created sandbox: %v, want [agent]", info.Sessions)
	}
	if _, err := c.Exec(ctx, info.ID, api.ExecRequest{Session: "agent", Command: "cd /tmp; export V=1"}); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Exec(ctx, info.ID, api.ExecRequest{Session: "agent", Command: "echo $PWD $V"}); err != nil || res.Stdout != "/tmp 1\n" {
		t.Fatalf("the create's session did not keep its state: %v %+v", err, res)
	}
	wantCode(t, c.OpenSession(ctx, info.ID, api.SessionRequest{Name: "agent"}), api.CodeConflict)
	_, err = c.CreateSandbox(ctx, api.CreateSandboxRequest{Session: "../x"})
	wantCode(t, err, api.CodeBadRequest)
	if l, err := c.Sandboxes(ctx, nil); err != nil || len(l) != 1 {
		t.Errorf("after the failed create: %v, %d sandboxes, want 1", err, len(l))
	}
}
