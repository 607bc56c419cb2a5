package sandbox

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/session"
)

// testExecCancelWaits: a one-shot Exec whose context ends stops its
// command, and returns once the command and what it started are dead, so
// its caller finds nothing of it left; here a command that ignores SIGINT
// lives until the kill grace's SIGKILL. Before, the command ran on,
// unseen, until its own end or its timeout (none here).
func testExecCancelWaits(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := sb.Exec(ctx, session.ExecRequest{Command: "trap '' INT; sleep 61 & : >/tmp/started; wait"})
		done <- err
	}()
	for deadline := time.Now().Add(time.Minute); sh(t, sb, "test -e /tmp/started").ExitCode != 0; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("the exec ended before it started its sleep: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the exec never started its sleep")
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled exec returned %v, want context.Canceled", err)
	}
	if n := mustOK(t, sb, `ps -eo args | grep -c '^sleep 61' || true`); n != "0\n" {
		t.Fatalf("right after the cancelled exec returned: %q of its sleeps alive, want none", n)
	}
	if got := mustOK(t, sb, "echo after"); got != "after\n" {
		t.Fatalf("an exec after the cancelled one: %q", got)
	}
}

// testInterruptWaits: InterruptSession answers once the command it
// interrupted has ended, so its caller finds nothing of it left; here a
// command that ignores SIGINT lives until the kill grace's SIGKILL.
// Before, the answer came as soon as the interrupt was sent.
func testInterruptWaits(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := runInSession(ctx, t, sb, "(trap '' INT; : >/tmp/started; exec sleep 62)", "test -e /tmp/started && pgrep -x sleep")
	if n, err := sb.InterruptSession(ctx, "s"); err != nil || n != 1 {
		t.Fatalf("interrupt: %d %v, want 1 interrupted", n, err)
	}
	if n := mustOK(t, sb, `ps -eo args | grep -c '^sleep 62' || true`); n != "0\n" {
		t.Fatalf("right after the interrupt's answer: %q of the command's sleeps alive, want none", n)
	}
	if r := <-done; r.err != nil || !r.res.TimedOut {
		t.Fatalf("the interrupted command: %+v %v, want TimedOut", r.res, r.err)
	}
	if res, err := sb.SessionExec(ctx, "s", session.ExecRequest{Command: "echo after"}); err != nil || res.Output != "after\n" {
		t.Fatalf("the session after the interrupt: %+v %v", res, err)
	}
}

// testSessionExecCancelWaits: a SessionExec whose context ends interrupts
// its command as InterruptSession would, and returns ctx.Err() once the
// command has ended; the session stays usable. Before, the call returned
// at once and the command ran on in the session, unseen, until its own
// end or its timeout (none here).
func testSessionExecCancelWaits(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runInSession(ctx, t, sb, "(trap '' INT; : >/tmp/started; exec sleep 63)", "test -e /tmp/started && pgrep -x sleep")
	cancel()
	if r := <-done; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the cancelled session exec returned %+v %v, want context.Canceled", r.res, r.err)
	}
	if n := mustOK(t, sb, `ps -eo args | grep -c '^sleep 63' || true`); n != "0\n" {
		t.Fatalf("right after the cancelled session exec returned: %q of its sleeps alive, want none", n)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if res, err := sb.SessionExec(ctx, "s", session.ExecRequest{Command: "echo after"}); err != nil || res.Output != "after\n" {
		t.Fatalf("the session after the cancelled exec: %+v %v", res, err)
	}
}
