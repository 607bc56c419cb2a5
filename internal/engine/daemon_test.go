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
	"github.com/minisandbox/msb/internal/warm"
)

// TestEngineAdmissionQuota: the number of sandboxes is bounded; over it a
// request fails at once (ErrQuota) or waits for a close; a limit above the
// whole budget is ErrTooLarge; nothing is left half-made.
func TestEngineAdmissionQuota(t *testing.T) {
	e := openEngine(t, "", func(c *Config) {
		c.MaxSandboxes, c.GradingReserve = 2, -1
		c.DiskBudget, c.Limits.DiskBytes = 1<<30, 256<<20
	})
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
	for e.admit.quota().Sandboxes == 2 && e.admit.waitingNow() == 0 {
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

// TestEngineGradingReserve: agents' sandboxes cannot take the room held
// back for grading, so agents filling every slot they may have, all
// evaluating before they close, are all graded (without the reserve each
// waited for a slot only its own close frees); where the budgets cannot
// hold a grading sandbox beside the agent's, evaluate says so at once.
func TestEngineGradingReserve(t *testing.T) {
	id := generated(t).Instances[0].InstanceID
	e := openEngine(t, "", func(c *Config) { c.MaxSandboxes = 3 })
	if q := e.Quota(); q.GradingReserve != 1 {
		t.Fatalf("quota %+v", q)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	agents := make([]*Sandbox, 2)
	for i := range agents {
		s, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: id})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		agents[i] = s
	}
	if _, err := e.CreateSandbox(ctx, SandboxRequest{AdmissionWait: -1}); !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "held back for grading") {
		t.Fatalf("a third agent: %v", err)
	}
	var wg sync.WaitGroup
	outcomes := make([]api.Outcome, len(agents))
	errs := make([]error, len(agents))
	for i, s := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, _, err := s.Evaluate(ctx, "agent")
			outcomes[i], errs[i] = res.Outcome, err
		}()
	}
	wg.Wait()
	for i := range agents {
		if errs[i] != nil || outcomes[i] != api.OutcomeEmptyPatch { // the agents changed nothing
			t.Fatalf("agent %d graded: %v %q", i, errs[i], outcomes[i])
		}
	}

	one := openEngine(t, "", func(c *Config) { c.MaxSandboxes = 1 })
	if q := one.Quota(); q.GradingReserve != 0 {
		t.Fatalf("one slot: quota %+v", q)
	}
	s, err := one.CreateSandbox(ctx, SandboxRequest{InstanceID: id})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Evaluate(ctx, "agent"); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "max sandboxes 1") {
		t.Fatalf("grading beside the only slot: %v", err)
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
	// The state is set by a command of its own: an interrupt that lands
	// before `X=kept` ran would abort the rest of that line.
	if _, err := s.Exec(ctx, api.ExecRequest{Session: "main", Command: "cd /usr; X=kept"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan api.ExecResult, 1)
	go func() {
		res, err := s.Exec(ctx, api.ExecRequest{Session: "main", Command: "echo started; sleep 60"})
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

// TestEngineSpares: with spares on, the create after the first of an
// instance takes a sandbox started ahead, which is as fresh as a new one
// (nothing the previous agent did is in it); spares are not live
// sandboxes, follow the instances created most recently, expire, and are
// closed with the engine.
func TestEngineSpares(t *testing.T) {
	g := generated(t)
	a, b := g.Instances[0].InstanceID, g.Instances[1].InstanceID
	e := openEngine(t, "", func(c *Config) { c.Spares, c.SpareIdle = 1, time.Hour })
	ctx := context.Background()
	waitFor := func(what string, ok func(warm.Stats) bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if st := e.Stats().Spares; ok(st) && st.Making == 0 {
				return
			}
		}
		t.Fatalf("spares: never %s: %+v", what, e.Stats().Spares)
	}
	first, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: a})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Exec(ctx, api.ExecRequest{Command: "echo dirty > /testbed/LEFT && touch /tmp/left"}); err != nil {
		t.Fatal(err)
	}
	waitFor("made", func(st warm.Stats) bool { return st.Made == 1 })
	if n := len(e.Sandboxes(nil)); n != 1 {
		t.Fatalf("the spare is listed: %d live", n)
	}
	first.Close()
	second, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: a})
	if err != nil {
		t.Fatal(err)
	}
	if st := e.Stats().Spares; st.Hits != 1 || st.Misses != 1 {
		t.Fatalf("the second create did not take the spare: %+v", st)
	}
	res, err := second.Exec(ctx, api.ExecRequest{Command: "git status --short; ls /tmp/left /testbed/LEFT 2>&1 | wc -l; pwd"})
	if err != nil || res.Stdout != "2\n/testbed\n" || second.ID() == first.ID() {
		t.Fatalf("the spare is not fresh: %v %q", err, res.Stdout)
	}
	if d, err := second.Diff(ctx); err != nil || d != "" {
		t.Fatalf("diff of the spare: %v %q", err, d)
	}
	second.Close()
	waitFor("made again", func(st warm.Stats) bool { return st.Made == 2 && st.Spares == 1 })
	// Another instance is another key: its spare evicts a's (Spares 1).
	other, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: b})
	if err != nil {
		t.Fatal(err)
	}
	other.Close()
	waitFor("evicted", func(st warm.Stats) bool { return st.Evicted == 1 && st.Made == 3 && st.Spares == 1 })
	if st := e.Stats().Spares; st.Hits != 1 || st.Misses != 2 {
		t.Fatalf("after another instance: %+v", st)
	}
	e.spares.Expire(time.Now().Add(2 * time.Hour))
	if st := e.Stats().Spares; st.Spares != 0 || st.Expired != 1 {
		t.Fatalf("after expiry: %+v", st)
	}
	// The next spare is closed with the engine (openEngine's cleanup
	// checks that nothing is left).
	again, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: b})
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
	waitFor("made for the engine's close", func(st warm.Stats) bool { return st.Made == 4 })
}
