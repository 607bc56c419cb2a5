package sandbox

import (
	"context"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/session"
)

// escapees starts, as background jobs, processes that a kill of a shell's
// tree, group and marker misses (session.escapeeCommands): sleep tag1
// clears its environment and is re-parented in a process group of its own
// but stays in the shell's session; a loop starts, as fast as it can, sleeps
// tag2 that clear their environment and leave the session, found only as
// its children while it lives.
func escapees(tag1, tag2 string) string {
	return "set -m; (env -i sleep " + tag1 + " >/dev/null 2>&1 &); " +
		"(for i in $(seq 1000); do env -i setsid sleep " + tag2 + " >/dev/null 2>&1 & done; wait) >/dev/null 2>&1 &"
}

// countSleeps is how many processes of sb run sleep arg.
func countSleeps(t *testing.T, sb *Sandbox, arg string) string {
	t.Helper()
	return mustOK(t, sb, "ps -eo args | grep -c '^sleep "+arg+"$' || true")
}

// testSessionCloseKillsEscapees: closing a session kills what it started
// that left its process group or session and cleared its environment,
// and a fork loop's last children, but not another session's job; a
// one-shot Exec ends the same kinds once its shell exits. Before, the
// sleeps that left the group lived on, and so did some of the loop's.
func testSessionCloseKillsEscapees(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, name := range []string{"s", "other"} {
		if err := sb.OpenSession(ctx, name, SessionOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, cmd := range map[string]string{"other": "sleep 1010.5 >/dev/null 2>&1 &", "s": escapees("1011.5", "1012.5")} {
		if res, err := sb.SessionExec(ctx, name, session.ExecRequest{Command: cmd}); err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %q: %+v %v", name, cmd, res, err)
		}
	}
	waitUntil := "until [ $(ps -eo args | grep -c '^sleep 1011.5$') -ge 1 ] && [ $(ps -eo args | grep -c '^sleep 1012.5$') -ge 50 ]; do sleep 0.01; done"
	mustOK(t, sb, waitUntil)
	if err := sb.CloseSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	for tag, want := range map[string]string{"1010.5": "1\n", "1011.5": "0\n", "1012.5": "0\n"} {
		if got := countSleeps(t, sb, tag); got != want {
			t.Errorf("right after the close of session s: %q processes run sleep %s, want %q", got, tag, want)
		}
	}

	res, err := sb.Exec(ctx, session.ExecRequest{Command: escapees("1013.5", "1014.5") + " " +
		"until [ $(ps -eo args | grep -c '^sleep 1013.5$') -ge 1 ] && [ $(ps -eo args | grep -c '^sleep 1014.5$') -ge 50 ]; do sleep 0.01; done"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("the one-shot exec: %+v %v", res, err)
	}
	for tag, want := range map[string]string{"1010.5": "1\n", "1013.5": "0\n", "1014.5": "0\n"} {
		if got := countSleeps(t, sb, tag); got != want {
			t.Errorf("right after the one-shot exec returned: %q processes run sleep %s, want %q", got, tag, want)
		}
	}
}
