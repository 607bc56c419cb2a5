package engine

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/checkpoint"
)

// counterStart starts, in a session, a Python counter that draws a token,
// appends each number to /tmp/log (open all along) and writes "token n"
// to /tmp/n: only a process carried with its memory goes on with both.
const counterStart = `setsid python3 -c '
import os, time
token, n = os.urandom(8).hex(), 0
log = open("/tmp/log", "a")
while True:
    n += 1
    log.write("%d\n" % n); log.flush()
    with open("/tmp/n.new", "w") as f:
        f.write("%s %d" % (token, n))
    os.rename("/tmp/n.new", "/tmp/n")
    time.sleep(0.02)
' </dev/null >/dev/null 2>&1 &`

// readCounter waits until the counter of s passes after and returns its
// token and number.
func readCounter(t *testing.T, s *Sandbox, after int) (string, int) {
	t.Helper()
	var last string
	for range 500 {
		res, err := s.Exec(context.Background(), api.ExecRequest{Command: "cat /tmp/n", TimeoutNs: int64(10 * time.Second)})
		if err != nil {
			t.Fatalf("%s: %v", s.ID(), err)
		}
		last = res.Stdout
		if tok, ns, ok := strings.Cut(strings.TrimSpace(res.Stdout), " "); ok && res.ExitCode == 0 {
			if n, err := strconv.Atoi(ns); err == nil && n > after {
				return tok, n
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: the counter did not pass %d in 10 s (last %q)", s.ID(), after, last)
	return "", 0
}

// dumpableSandbox creates a raw host-base sandbox whose processes can be
// dumped: its control socket lies in its network namespace
// (checkpoint.CheckDumpable), which the runtime made for it, ahead or at
// once, also for the engine's first create.
func dumpableSandbox(t testing.TB, e *Engine) *Sandbox {
	t.Helper()
	s, err := e.CreateSandbox(context.Background(), SandboxRequest{HostBase: true})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, s)
	if err := checkpoint.CheckDumpable(s.sbox()); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestForkProcesses forks a sandbox whose session runs a counter with
// processes "all": each child's counter goes on from the parent's number
// with its token and its open log without a gap, in the parent's session
// (its variables kept); the children and the parent do not see each
// other's writes; the parent runs on; nothing is left after the close
// (snapshotEngine's leak check). A child is forked with its processes as
// its parent was: the grandchild's counter goes on from the child's
// number, with the child's writes; a child is rolled back in place.
// Rootless, the fork is refused naming why and leaves no child. Requests the fork cannot carry processes for
// are refused too.
func TestForkProcesses(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	all := api.ForkRequest{Count: 2, Processes: api.ForkProcessesAll, Labels: map[string]string{"child": "yes"}}
	if e.rt.Rootless() {
		parent := hostSandbox(t, e)
		kids, err := e.Fork(ctx, parent.ID(), all)
		closeAll(t, kids...)
		if !errors.Is(err, ErrProcessesUnsupported) || !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "rootless") {
			t.Fatalf("a rootless fork with processes: %v, want ErrProcessesUnsupported naming rootless", err)
		}
		if n := len(e.Sandboxes(nil)); n != 1 {
			t.Errorf("%d sandboxes after the refused fork, want the parent alone", n)
		}
		return
	}
	parent, token, before := counterParent(t, e)
	sh(t, parent, "bg", "export KEPT=yes")

	for _, bad := range []struct {
		req  api.ForkRequest
		want error
	}{
		{api.ForkRequest{Processes: "some"}, ErrBadRequest},
		{api.ForkRequest{Processes: api.ForkProcessesAll, Snapshot: "none-such"}, ErrNotFound},
	} {
		if kids, err := e.Fork(ctx, parent.ID(), bad.req); !errors.Is(err, bad.want) {
			closeAll(t, kids...)
			t.Errorf("fork %+v: %v, want %v", bad.req, err, bad.want)
		}
	}

	t0 := time.Now()
	kids, err := e.Fork(ctx, parent.ID(), all)
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, kids...)
	t.Logf("forked 2 children with processes in %v", time.Since(t0).Round(time.Millisecond))
	if len(kids) != 2 {
		t.Fatalf("%d children, want 2", len(kids))
	}
	for i, k := range kids {
		tok, n := readCounter(t, k, before)
		if tok != token {
			t.Errorf("child %d: the counter's token %q, want the parent's %q", i, tok, token)
		}
		t.Logf("child %d: counter at %d (parent's at %d before the fork)", i, n, before)
		if out := sh(t, k, "", `awk 'NR != $1 { print "line " NR ": " $0; exit 1 } END { print NR }' /tmp/log`); strings.TrimSpace(out) == "0" {
			t.Errorf("child %d: an empty /tmp/log", i)
		}
		if got := k.Info().Sessions; !slices.Equal(got, []string{"bg"}) {
			t.Errorf("child %d's sessions: %q, want the parent's", i, got)
		}
		if got := sh(t, k, "bg", `echo "$PWD|${KEPT-}"; echo child > /tmp/mine-`+strconv.Itoa(i)); got != "/tmp|yes\n" {
			t.Errorf("child %d's session bg: %q, want the parent's shell going on", i, got)
		}
		if k.Info().Labels["child"] != "yes" {
			t.Errorf("child %d's labels: %v", i, k.Info().Labels)
		}
	}
	sh(t, parent, "", "echo parent > /tmp/mine-p")
	for _, w := range []struct {
		file   string
		seenBy []*Sandbox
	}{
		{"mine-0", []*Sandbox{parent, kids[1]}},
		{"mine-1", []*Sandbox{parent, kids[0]}},
		{"mine-p", kids},
	} {
		for _, s := range w.seenBy {
			res, err := s.Exec(ctx, api.ExecRequest{Command: "test -e /tmp/" + w.file, TimeoutNs: int64(10 * time.Second)})
			if err != nil || res.ExitCode == 0 {
				t.Errorf("%s sees /tmp/%s of another sandbox (%v)", s.ID(), w.file, err)
			}
		}
	}
	if tok, _ := readCounter(t, parent, before+1); tok != token {
		t.Errorf("the parent's counter after the fork: token %q, want %q", tok, token)
	}
	// A restored child is dumped as a created sandbox is: its control
	// socket lies in its network namespace.
	_, at := readCounter(t, kids[0], before)
	grand, err := e.Fork(ctx, kids[0].ID(), api.ForkRequest{Count: 1, Processes: api.ForkProcessesAll})
	if err != nil {
		t.Fatalf("forking a restored child with processes: %v", err)
	}
	closeAll(t, grand...)
	if tok, n := readCounter(t, grand[0], at); tok != token {
		t.Errorf("the grandchild's counter: token %q at %d, want %q past %d", tok, n, token, at)
	}
	if got := sh(t, grand[0], "bg", `echo "$PWD|${KEPT-}"; cat /tmp/mine-0`); got != "/tmp|yes\nchild\n" {
		t.Errorf("the grandchild's session bg and child 0's write: %q", got)
	}
	// A restored child is rolled back in place, as a created one is: its
	// init kept, its files those it was restored over (its own write
	// gone), its processes (the counter) ended.
	pid := kids[1].InitPid()
	if _, err := e.Rollback(ctx, kids[1].ID(), api.RollbackRequest{}); err != nil {
		t.Fatalf("rolling a restored child back: %v", err)
	}
	if got := kids[1].InitPid(); got != pid {
		t.Errorf("the rolled back child's init: %d, want %d (reset in place)", got, pid)
	}
	if got := sh(t, kids[1], "", `test -e /tmp/mine-1 && echo left; a=$(cat /tmp/n); sleep 0.3; [ "$a" = "$(cat /tmp/n)" ] && echo still`); got != "still\n" {
		t.Errorf("the rolled back child: %q, want its write gone and the counter stopped", got)
	}
	// A parent holding a TCP socket: carried where criu can dump it
	// (checkpoint.ErrInetSockets says where not), else refused, 400.
	sh(t, parent, "bg", `setsid python3 -c 'import socket, time; s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); time.sleep(600)' </dev/null >/dev/null 2>&1 & sleep 0.5`)
	criu, _ := findCriu()
	can := criu.CheckSockets(parent.sbox())
	kids2, err := e.Fork(ctx, parent.ID(), api.ForkRequest{Count: 1, Processes: api.ForkProcessesAll})
	closeAll(t, kids2...)
	switch {
	case errors.Is(can, checkpoint.ErrInetSockets):
		if !errors.Is(err, ErrProcessesUnsupported) || len(kids2) != 0 {
			t.Errorf("a fork of a parent holding a TCP socket criu cannot dump: %v (%d children), want ErrProcessesUnsupported", err, len(kids2))
		}
	case can != nil:
		t.Fatal(can)
	case err != nil:
		t.Errorf("a fork of a parent holding a listening TCP socket: %v", err)
	}
}

// TestSnapshotProcesses takes a named snapshot with processes "all" of a
// sandbox whose session runs the counter, closes the sandbox (a pause),
// and forks the snapshot alone with processes "all" (a resume): the
// child's counter goes on from past the parent's number with its token,
// in the parent's session; paused and resumed again, it goes on again. A
// snapshot of files only is refused a fork with processes; a deleted
// snapshot's dump is swept.
func TestSnapshotProcesses(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	if e.rt.Rootless() {
		parent := hostSandbox(t, e)
		if _, err := e.SnapshotProcesses(ctx, parent.ID(), api.SnapshotRequest{Name: "p"}); !errors.Is(err, ErrProcessesUnsupported) {
			t.Fatalf("a rootless snapshot with processes: %v, want ErrProcessesUnsupported", err)
		}
		return
	}
	parent, token, before := counterParent(t, e)
	sh(t, parent, "bg", "export KEPT=yes")
	info, err := e.SnapshotProcesses(ctx, parent.ID(), api.SnapshotRequest{Name: "paused"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.DeleteSnapshot("paused") })
	if info.Name != "paused" || len(info.Sessions) != 0 && info.Sessions[0].Name != "bg" {
		t.Errorf("snapshot info %+v", info)
	}
	if _, err := e.Snapshot(ctx, parent.ID(), api.SnapshotRequest{Name: "files"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.DeleteSnapshot("files") })
	if err := parent.Close(); err != nil {
		t.Fatal(err)
	}
	if kids, err := e.Fork(ctx, "", api.ForkRequest{Snapshot: "files", Processes: api.ForkProcessesAll}); !errors.Is(err, ErrProcessesUnsupported) {
		closeAll(t, kids...)
		t.Errorf("a fork with processes of a snapshot of files: %v, want ErrProcessesUnsupported", err)
	}
	kids, err := e.Fork(ctx, "", api.ForkRequest{Snapshot: "paused", Processes: api.ForkProcessesAll})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, kids...)
	if tok, n := readCounter(t, kids[0], before); tok != token {
		t.Errorf("the resumed counter: token %q at %d, want %q past %d", tok, n, token, before)
	}
	if got := sh(t, kids[0], "bg", `echo "$PWD|${KEPT-}"`); got != "/tmp|yes\n" {
		t.Errorf("the resumed session bg: %q", got)
	}
	// The resumed sandbox is paused and resumed again with its processes
	// (E2B's second pause), as a created one is.
	_, at := readCounter(t, kids[0], before)
	if _, err := e.SnapshotProcesses(ctx, kids[0].ID(), api.SnapshotRequest{Name: "paused-again"}); err != nil {
		t.Fatalf("pausing the resumed sandbox with its processes: %v", err)
	}
	t.Cleanup(func() { e.DeleteSnapshot("paused-again") })
	if err := kids[0].Close(); err != nil {
		t.Fatal(err)
	}
	again, err := e.Fork(ctx, "", api.ForkRequest{Snapshot: "paused-again", Processes: api.ForkProcessesAll})
	if err != nil {
		t.Fatalf("resuming the second pause: %v", err)
	}
	closeAll(t, again...)
	if tok, n := readCounter(t, again[0], at); tok != token {
		t.Errorf("the counter resumed twice: token %q at %d, want %q past %d", tok, n, token, at)
	}
	if err := e.DeleteSnapshot("paused"); err != nil {
		t.Fatal(err)
	}
	e.sweepDumps()
	if _, err := os.Stat(e.dumpDir("paused")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dump of a deleted snapshot after a sweep: %v, want it gone", err)
	}
}

// BenchmarkForkFirstCommand times a fork of one child and its first
// command (echo in the parent's session) with processes "none" and "all",
// interleaved in each round, on a parent whose session runs the counter;
// it reports each one's median and all/none. Root with criu:
//
//	go test -run '^$' -bench ForkFirstCommand -benchtime 10x ./internal/engine/
func BenchmarkForkFirstCommand(b *testing.B) {
	ctx := context.Background()
	e, err := Open(ctx, Config{StateDir: b.TempDir(), Cache: CacheConfig{Dir: b.TempDir()}})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if e.rt.Rootless() {
		b.Skip("processes are carried in root mode only")
	}
	if _, err := findCriu(); err != nil {
		b.Skip(err)
	}
	parent := dumpableSandbox(b, e)
	if err := parent.OpenSession(ctx, api.SessionRequest{Name: "bg"}); err != nil {
		b.Fatal(err)
	}
	if res, err := parent.Exec(ctx, api.ExecRequest{Session: "bg", Command: counterStart, TimeoutNs: int64(time.Minute)}); err != nil || res.ExitCode != 0 {
		b.Fatal(err, res)
	}
	var times [2][]time.Duration
	for i := 0; i < b.N; i++ {
		for j, p := range []string{api.ForkProcessesNone, api.ForkProcessesAll} {
			start := time.Now()
			kids, err := e.Fork(ctx, parent.ID(), api.ForkRequest{Count: 1, Processes: p})
			if err != nil {
				b.Fatal(err)
			}
			res, err := kids[0].Exec(ctx, api.ExecRequest{Session: "bg", Command: "echo hi", TimeoutNs: int64(time.Minute)})
			times[j] = append(times[j], time.Since(start))
			kids[0].Close()
			if err != nil || res.Stdout != "hi\n" {
				b.Fatalf("processes %q: first command: %v %+v", p, err, res)
			}
		}
	}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2]) / 1e6
	}
	none, all := median(times[0]), median(times[1])
	b.ReportMetric(none, "none-ms")
	b.ReportMetric(all, "all-ms")
	b.ReportMetric(all/none, "all/none")
}
