package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/session"
)

// signalState is what /proc/<pid>/status says of a process that starts
// with no signal blocked or ignored, as a process started by a login shell
// does.
const signalState = "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"

// testSignals: what the supervisor does to stay immune to signals (as PID 1
// it takes every one but a few from the Go runtime) does not pass on to the
// processes of the sandbox, whether a command or a session's, in either
// init (in place, or exec'd in a cgo build); and no signal sent from inside
// ends the supervisor, those the Go runtime and glibc use among them.
func testSignals(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	const status = "grep -E '^Sig(Blk|Ign):' /proc/self/status"
	if got := mustOK(t, sb, status); got != signalState {
		t.Errorf("a command starts with\n%swant\n%s", got, signalState)
	}
	if err := sb.OpenSession(context.Background(), "s", SessionOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := mustSession(t, sb, status); got != signalState {
		t.Errorf("a session's command starts with\n%swant\n%s", got, signalState)
	}
	mustOK(t, sb, "for s in $(seq 1 64); do kill -$s 1 || exit; done")
	if got := mustOK(t, sb, "echo alive"); got != "alive\n" {
		t.Fatalf("after every signal to PID 1: %q", got)
	}
	if got := mustSession(t, sb, "echo alive"); got != "alive\n" {
		t.Fatalf("the session after every signal to PID 1: %q", got)
	}
}

// testSessionInterrupt: InterruptSession from another goroutine ends a
// running list as Ctrl-C does: SIGINT ends sleep, and bash abandons the
// rest of the line. Where the session's processes started with SIGINT
// ignored (the supervisor's own disposition passed on across the cgo
// init's exec), sleep lasted until the SIGKILL after the grace time and
// bash, which keeps ignoring a SIGINT ignored at its start, went on to
// the echo.
func testSessionInterrupt(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Once sleep runs: an interrupt in the first moments of a command is
	// internal/session's TestEarlyInterrupt.
	done := runInSession(ctx, t, sb, "sleep 60; echo no", "pgrep -x sleep")
	if n, err := sb.InterruptSession(ctx, "s"); err != nil || n != 1 {
		t.Fatalf("interrupt: %d %v, want 1 interrupted", n, err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("interrupted exec: %v", r.err)
	}
	if !r.res.TimedOut || strings.Contains(r.res.Output, "no") {
		t.Fatalf("interrupted 'sleep 60; echo no': %+v, want TimedOut and the echo never run", r.res)
	}
	if got := mustSession(t, sb, "echo yes"); got != "yes\n" {
		t.Fatalf("session after the interrupt: %q", got)
	}
}

// sessionResult is a session command's result, or its error.
type sessionResult struct {
	res session.Result
	err error
}

// runInSession opens session "s" in sb and starts cmd in it; it returns,
// with the channel the command's result comes on, once probe succeeds in
// a command of its own (the command's process is seen).
func runInSession(ctx context.Context, t *testing.T, sb *Sandbox, cmd, probe string) <-chan sessionResult {
	t.Helper()
	if err := sb.OpenSession(ctx, "s", SessionOptions{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan sessionResult, 1)
	go func() {
		res, err := sb.SessionExec(ctx, "s", session.ExecRequest{Command: cmd})
		done <- sessionResult{res, err}
	}()
	for sh(t, sb, probe).ExitCode != 0 {
		select {
		case r := <-done:
			t.Fatalf("%q ended before %q succeeded: %+v %v", cmd, probe, r.res, r.err)
		case <-ctx.Done():
			t.Fatalf("%q never succeeded beside %q", probe, cmd)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return done
}
