package sandbox

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/session"
)

// TestSessionAhead: a session opened by the create (Config.Session) is a
// session as OpenSession makes it, with its env and directory; a fork bomb
// run in it finds the supervisor's spare threads made (they are made while
// its shell starts); a session that cannot start fails the create and
// leaves nothing behind (testRuntime checks). TestRootless reruns it.
func TestSessionAhead(t *testing.T) {
	rt := testRuntime(t)
	run := func(t *testing.T, sb *Sandbox, name, cmd string) session.Result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := sb.SessionExec(ctx, name, session.ExecRequest{Command: cmd, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatalf("session %s: %q: %v", name, cmd, err)
		}
		return res
	}
	t.Run("EnvAndDir", func(t *testing.T) {
		sb := create(t, rt, Config{HostBase: true, Env: []string{"A=1"}, Workdir: "/work",
			Session: &SessionStart{Name: "main", SessionOptions: SessionOptions{Env: []string{"B=2"}, Dir: "/tmp"}}})
		if res := run(t, sb, "main", `echo "$A $B $(pwd)"; export C=3; cd /`); res.ExitCode != 0 || res.Output != "1 2 /tmp\n" {
			t.Fatalf("first command: exit %d, output %q; want 0, %q", res.ExitCode, res.Output, "1 2 /tmp\n")
		}
		if res := run(t, sb, "main", `echo "$C $(pwd)"`); res.Output != "3 /\n" {
			t.Fatalf("the session's state did not carry over: %q", res.Output)
		}
		ctx := context.Background()
		if err := sb.OpenSession(ctx, "main", SessionOptions{}); !errors.Is(err, ErrExists) {
			t.Fatalf("opening main again: %v, want ErrExists", err)
		}
		if err := sb.OpenSession(ctx, "other", SessionOptions{}); err != nil {
			t.Fatal(err)
		}
		if res := run(t, sb, "other", `echo "$A $B $(pwd)"`); res.Output != "1  /work\n" {
			t.Fatalf("a session opened after: %q, want the sandbox's env and workdir", res.Output)
		}
		if sb.Config().Session != nil {
			t.Error("Config() holds the session: a fork made from it would open it again")
		}
		if !slices.ContainsFunc(sb.Timings(), func(p Phase) bool { return p.Name == PhaseSupSession }) {
			t.Errorf("no %s among the create's phases %v", PhaseSupSession, sb.Timings())
		}
	})
	t.Run("PromptCommand", func(t *testing.T) {
		// An environment bash acts on before its first line: the spare
		// threads are made first, and the session works the same.
		sb := create(t, rt, Config{HostBase: true, Env: []string{"PROMPT_COMMAND=echo p >>/tmp/pc"},
			Session: &SessionStart{Name: "main"}})
		if res := run(t, sb, "main", `echo ok`); res.Output != "ok\n" {
			t.Fatalf("got %q", res.Output)
		}
	})
	t.Run("ForkBomb", func(t *testing.T) {
		sb := create(t, rt, Config{HostBase: true, Limits: Limits{Pids: 64}, Session: &SessionStart{Name: "main"}})
		res := run(t, sb, "main", `bomb() { bomb | bomb & }; bomb 2>/dev/null; sleep 2; kill -9 -1 2>/dev/null; true`)
		t.Logf("fork bomb: exit %d, timed out %v", res.ExitCode, res.TimedOut)
		if u, err := sb.Usage(); err == nil && u.Pids > 64 {
			t.Fatalf("pids %d over the limit of 64", u.Pids)
		}
		if got := mustOK(t, sb, "echo alive"); got != "alive\n" {
			t.Fatalf("after the bomb: %q", got)
		}
	})
	t.Run("SignalsAndOrphans", func(t *testing.T) {
		// The supervisor's signal handling is completed once the shell
		// is forked: orphans are still reaped, and an interrupt still
		// ends a command and leaves the session usable.
		sb := create(t, rt, Config{HostBase: true, Session: &SessionStart{Name: "main"}})
		res := run(t, sb, "main", `for i in 1 2 3; do (sleep 0.05 &); done; sleep 0.5; ps -eo stat= | grep -c '^Z' || true`)
		if res.Output != "0\n" {
			t.Fatalf("zombies left after orphans exited: %q", res.Output)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := sb.SessionExec(ctx, "main", session.ExecRequest{Command: "sleep 30", Timeout: 200 * time.Millisecond})
		if err != nil || !r.TimedOut {
			t.Fatalf("sleep 30 with a 200 ms timeout: %+v, %v", r, err)
		}
		if res := run(t, sb, "main", "echo still"); res.Output != "still\n" {
			t.Fatalf("after the interrupt: %q", res.Output)
		}
	})
	t.Run("Fails", func(t *testing.T) {
		for _, ss := range []SessionStart{{Name: "main", SessionOptions: SessionOptions{Dir: "/no/such/dir"}}, {Name: ""}} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			sb, err := rt.Create(ctx, Config{HostBase: true, Session: &ss})
			cancel()
			if err == nil {
				sb.Close()
				t.Fatalf("session %+v: the create succeeded", ss)
			}
			if !strings.Contains(err.Error(), "session") {
				t.Errorf("session %+v: the error does not say the session failed: %v", ss, err)
			}
			t.Logf("session %+v: %v", ss, err)
		}
	})
}
