package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/sandbox"
)

// TestEngineAdmissionQuota: the number of sandboxes is bounded; over it a
// request fails at once (ErrQuota) or waits for a close; a limit above the
// whole budget is ErrTooLarge; nothing is left half-made.
func TestEngineAdmissionQuota(t *testing.T) {
	e := openEngine(t, "", func(c *Config) { c.MaxSandboxes = 2; c.DiskBudget = 1 << 30; c.Limits.DiskBytes = 256 << 20 })
	ctx := context.Background()
	a, err := e.CreateSandbox(ctx, SandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.CreateSandbox(ctx, SandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateSandbox(ctx, SandboxRequest{AdmissionWait: -1}); !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "2 of 2") {
		t.Fatalf("third sandbox: %v", err)
	}
	if _, err := e.CreateSandbox(ctx, SandboxRequest{AdmissionWait: 50 * time.Millisecond}); !errors.Is(err, ErrQuota) {
		t.Fatalf("third sandbox, short wait: %v", err)
	}
	if q := e.Quota(); q.Sandboxes != 2 || q.DiskUsedBytes != 512<<20 {
		t.Fatalf("quota %+v", q)
	}
	var c *Sandbox
	var cerr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, cerr = e.CreateSandbox(ctx, SandboxRequest{AdmissionWait: time.Minute})
	}()
	// The waiter is admitted once a sandbox closes.
	for e.admit.quota().Sandboxes == 2 && len(e.admit.waiting) == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if cerr != nil {
		t.Fatal(cerr)
	}
	if _, err := e.CreateSandbox(ctx, SandboxRequest{Limits: api.Limits{DiskBytes: 2 << 30}}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("disk above the budget: %v", err)
	}
	b.Close()
	c.Close()
	if q := e.Quota(); q.Sandboxes != 0 || q.DiskUsedBytes != 0 || q.MemoryUsedBytes != 0 {
		t.Fatalf("quota after close %+v", q)
	}
	if st := e.Stats(); st.Rejected["sandboxes"] != 2 || st.Created["raw"] != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// TestEngineReap: a sandbox idle past its idle timeout, and one past its
// lifetime, are closed and say why; one in use is not idle.
func TestEngineReap(t *testing.T) {
	e := openEngine(t, "", func(c *Config) { c.ReapInterval = 20 * time.Millisecond })
	ctx := context.Background()
	idle, err := e.CreateSandbox(ctx, SandboxRequest{IdleTimeout: 300 * time.Millisecond, Lifetime: -1})
	if err != nil {
		t.Fatal(err)
	}
	short, err := e.CreateSandbox(ctx, SandboxRequest{Lifetime: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// A command longer than the idle timeout keeps the sandbox alive.
	if res, err := idle.Exec(ctx, api.ExecRequest{Command: "sleep 0.6; echo awake"}); err != nil || res.Stdout != "awake\n" {
		t.Fatalf("long command: %v %+v", err, res)
	}
	waitState := func(id, want string) api.SandboxInfo {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if info, err := e.SandboxInfo(id); err == nil && info.State == want {
				return info
			}
		}
		t.Fatalf("sandbox %s never became %s", id, want)
		return api.SandboxInfo{}
	}
	if info := waitState(short.ID(), api.SandboxReaped); info.Reason != api.ReapLifetime || info.ClosedAt == "" {
		t.Fatalf("short-lived: %+v", info)
	}
	if info := waitState(idle.ID(), api.SandboxReaped); info.Reason != api.ReapIdle {
		t.Fatalf("idle: %+v", info)
	}
	if _, err := e.Sandbox(idle.ID()); !errors.Is(err, ErrGone) || !strings.Contains(err.Error(), "idle") {
		t.Fatalf("get reaped: %v", err)
	}
	if _, err := idle.Exec(ctx, api.ExecRequest{Command: "true"}); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("exec on reaped: %v", err)
	}
	if st := e.Stats(); st.Reaped[api.ReapIdle] != 1 || st.Reaped[api.ReapLifetime] != 1 {
		t.Fatalf("stats %+v", st.Reaped)
	}
}

// TestEngineExec: a fresh bash with cwd, env and stdin; a command larger
// than one argument may be; streaming output as it comes; stat.
func TestEngineExec(t *testing.T) {
	e := openEngine(t, "", nil)
	ctx := context.Background()
	s, err := e.CreateSandbox(ctx, SandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Exec(ctx, api.ExecRequest{Command: `pwd; echo "$A $B"; cat; echo err >&2`, Cwd: "/usr", Env: []string{"A=1", "B=two words"},
		Stdin: "from stdin\n", SeparateStderr: true})
	if err != nil || res.Stdout != "/usr\n1 two words\nfrom stdin\n" || res.Stderr != "err\n" || res.ExitCode != 0 {
		t.Fatalf("exec: %v %+v", err, res)
	}
	big := "x=" + strings.Repeat("a", 3<<20) + "\necho ${#x}"
	if res, err := s.Exec(ctx, api.ExecRequest{Command: big}); err != nil || res.Stdout != "3145728\n" {
		t.Fatalf("3 MiB command: %v %q", err, res.Stdout)
	}
	if ents, err := s.ListDir(ctx, scratchDir); err != nil || len(ents) != 0 {
		t.Fatalf("scratch files left: %v %+v", err, ents)
	}
	if _, err := s.Exec(ctx, api.ExecRequest{Command: "true", Env: []string{"1A=x"}}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("bad env: %v", err)
	}
	if res, err := s.Exec(ctx, api.ExecRequest{Command: "true", Cwd: "/nonexistent"}); err != nil || res.ExitCode != 1 || !strings.Contains(res.Stdout, "nonexistent") {
		t.Fatalf("missing cwd: %v %+v", err, res)
	}
	var events []api.ExecEvent
	res, err = s.ExecStream(ctx, api.ExecRequest{Command: "echo one; sleep 0.3; printf 'two \\xc3'; printf '\\xa9\\n'; echo e >&2; exit 3", SeparateStderr: true},
		func(ev api.ExecEvent) { events = append(events, ev) })
	if err != nil || res.ExitCode != 3 || res.Stdout != "one\ntwo é\n" || res.Stderr != "e\n" {
		t.Fatalf("stream: %v %+v", err, res)
	}
	var out strings.Builder
	for _, ev := range events {
		if ev.Type == api.EventStdout {
			out.WriteString(ev.Data)
		}
	}
	if len(events) < 3 || events[0].Data != "one\n" || out.String() != res.Stdout {
		t.Fatalf("events %+v", events)
	}
	if fe, err := s.Stat(ctx, "/usr/bin"); err != nil || fe.Type != "dir" || fe.Name != "bin" {
		t.Fatalf("stat: %v %+v", err, fe)
	}
	if _, err := s.Stat(ctx, "/usr/nope"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("stat missing: %v", err)
	}
}

// TestEngineInterrupt: an interrupt stops the command running in a
// session (its exec returns the output so far, timed out) and the session
// goes on with its state.
func TestEngineInterrupt(t *testing.T) {
	e := openEngine(t, "", nil)
	ctx := context.Background()
	s, err := e.CreateSandbox(ctx, SandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.OpenSession(ctx, api.SessionRequest{Name: "main"}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.InterruptSession(ctx, "main"); err != nil || ok {
		t.Fatalf("idle interrupt: %v %v", ok, err)
	}
	done := make(chan api.ExecResult, 1)
	go func() {
		res, err := s.Exec(ctx, api.ExecRequest{Session: "main", Command: "cd /usr; X=kept; echo started; sleep 60"})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	for {
		ok, err := s.InterruptSession(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	res := <-done
	if !res.TimedOut {
		t.Fatalf("interrupted: %+v", res)
	}
	if res, err := s.Exec(ctx, api.ExecRequest{Session: "main", Command: "echo $PWD $X"}); err != nil || res.Stdout != "/usr kept\n" {
		t.Fatalf("after interrupt: %v %+v", err, res)
	}
	if _, err := s.InterruptSession(ctx, "nope"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
}
