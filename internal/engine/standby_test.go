package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
)

// TestSpareSession: a spare's session shell is started ahead. The
// client's first session with default options is that shell, renamed,
// and is what a newly started one would be; a first command outside a
// session, or a session asked for otherwise, ends it, so that the
// agent's commands see only what it started.
func TestSpareSession(t *testing.T) {
	id := generated(t).Instances[0].InstanceID
	e := openEngine(t, "", func(c *Config) { c.Spares, c.SpareIdle = 1, time.Hour })
	ctx := context.Background()
	spare := func() *Sandbox {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if st := e.Stats().Spares; st.Spares == 1 && st.Making == 0 {
				break
			}
		}
		hits := e.Stats().Spares.Hits
		s, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: id})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if e.Stats().Spares.Hits != hits+1 {
			t.Fatalf("the create did not take a spare: %+v", e.Stats().Spares)
		}
		return s
	}
	run := func(s *Sandbox, session, cmd string) string {
		t.Helper()
		res, err := s.Exec(ctx, api.ExecRequest{Session: session, Command: cmd})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%q: %v %+v", cmd, err, res)
		}
		return res.Stdout
	}
	// What a session sees of itself, but its marker and the sandbox's
	// host name.
	state := "pwd; echo $- $SHLVL; env | grep -Ev '^(MSB_SESSION_ID|HOSTNAME)=' | sort; shopt | md5sum"
	// The shell that runs it forks pgrep and waits (a pipeline's forks
	// would count as bash until they exec): the count includes that shell.
	bashes := "pgrep -cx bash || true"

	first, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: id}) // a miss: no spare yet
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if err := first.OpenSession(ctx, api.SessionRequest{Name: "main"}); err != nil {
		t.Fatal(err)
	}
	want := run(first, "main", state)
	if n := e.Stats().SpareSessions; n != 0 {
		t.Fatalf("a sandbox made on demand had a session started ahead (%d taken)", n)
	}

	taken := spare()
	if err := taken.OpenSession(ctx, api.SessionRequest{Name: "main"}); err != nil {
		t.Fatal(err)
	}
	if n := e.Stats().SpareSessions; n != 1 {
		t.Fatalf("the spare's session was not taken: %d", n)
	}
	if got := run(taken, "main", state); got != want {
		t.Fatalf("the session started ahead differs from a new one:\n%s\nwant\n%s", got, want)
	}
	if got := run(taken, "main", bashes); got != "1\n" {
		t.Fatalf("bash processes besides the session's: %q", got)
	}
	if info := taken.Info(); len(info.Sessions) != 1 || info.Sessions[0] != "main" {
		t.Fatalf("sessions listed: %v", info.Sessions)
	}
	if err := taken.OpenSession(ctx, api.SessionRequest{Name: "main"}); err == nil {
		t.Fatal("a second session named main was opened")
	}

	execFirst := spare()
	if got := run(execFirst, "", bashes); got != "1\n" {
		t.Fatalf("a first command outside a session sees %s bash processes, want only its own", strings.TrimSpace(got))
	}
	if err := execFirst.OpenSession(ctx, api.SessionRequest{Name: "later"}); err != nil {
		t.Fatal(err)
	}
	if got := run(execFirst, "later", "pwd"); got != "/testbed\n" {
		t.Fatalf("a session opened after the standby was dropped: %q", got)
	}

	withEnv := spare()
	if err := withEnv.OpenSession(ctx, api.SessionRequest{Name: "env", Env: []string{"X=1"}}); err != nil {
		t.Fatal(err)
	}
	if got := run(withEnv, "env", "echo $X; "+bashes); got != "1\n1\n" {
		t.Fatalf("a session with its own env: %q (want its X and only its shell)", got)
	}
	if n := e.Stats().SpareSessions; n != 1 {
		t.Fatalf("sessions taken from spares: %d, want only the first", n)
	}
}
