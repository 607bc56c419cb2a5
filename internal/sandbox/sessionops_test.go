package sandbox

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/session"
)

// testSessionRenameClose: a session renamed keeps its shell under the
// new name only; a rename onto a live session or of a missing one fails;
// Close ends a session that never ran a command (its shell alone, without
// killTree's searches) before it answers, and a used session's whole tree.
func testSessionRenameClose(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	ctx := context.Background()
	for _, name := range []string{"a", "c"} {
		if err := sb.OpenSession(ctx, name, SessionOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sb.SessionExec(ctx, "a", session.ExecRequest{Command: "X=kept"}); err != nil {
		t.Fatal(err)
	}
	if err := sb.RenameSession(ctx, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if res, err := sb.SessionExec(ctx, "b", session.ExecRequest{Command: "echo $X"}); err != nil || res.Output != "kept\n" {
		t.Fatalf("the renamed session: %v %+v", err, res)
	}
	if _, err := sb.SessionExec(ctx, "a", session.ExecRequest{Command: "true"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the old name still answers: %v", err)
	}
	if err := sb.RenameSession(ctx, "a", "d"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("renaming a missing session: %v", err)
	}
	if err := sb.RenameSession(ctx, "b", "c"); !errors.Is(err, ErrExists) {
		t.Fatalf("renaming onto a live session: %v", err)
	}
	// One command, which bash execs: a pipeline's forks are "bash" until
	// they exec, and ps could count them.
	bashes := "pgrep -cx bash"
	if got := mustOK(t, sb, bashes); got != "2\n" { // b's and c's
		t.Fatalf("bash processes before the close: %q", got)
	}
	if err := sb.CloseSession(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if got := mustOK(t, sb, bashes); got != "1\n" {
		t.Fatalf("the closed unused session's shell is still there: %q bash processes", got)
	}
	if _, err := sb.SessionExec(ctx, "b", session.ExecRequest{Command: "sleep 100 &"}); err != nil {
		t.Fatal(err)
	}
	if err := sb.CloseSession(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	// The killed sleep, reparented to init, is reaped on its SIGCHLD.
	for i := 0; ; i++ {
		res := sh(t, sb, "pgrep -x 'bash|sleep'")
		if res.ExitCode == 1 {
			break
		}
		if i == 50 {
			t.Fatalf("a used session's close left its tree: %q", res.Output)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := sb.CloseSession(ctx, "b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("closing a missing session: %v", err)
	}
}
