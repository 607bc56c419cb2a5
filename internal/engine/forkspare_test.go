package engine

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/warm"
)

// TestEnginePoolFork: a fork of a live raw sandbox leaves spares of its
// children's shape to be made, and the next fork of a sandbox
// of that shape takes them: each child is the parent's state at the fork
// (a file rewritten, one deleted, the session's cwd and variable), not
// the state of an earlier fork, with its own host name, labels and
// writes that no one else sees, and a rollback to its creation goes back
// to the snapshot. The child from a spare has its session served by the
// spare's shell, started before the fork (kept across the reset and
// adopted), the other by a shell of its own. The same rootless, where
// the spare's reset is done by the reset-root stage it started when it
// was made (sandbox.Sandbox.PrepareReset). No sandbox process or mount
// is left behind.
func TestEnginePoolFork(t *testing.T) {
	var e *Engine
	t.Cleanup(func() { // after the engine's close, which closes the spares
		if err := privtest.CheckLeaks(e.cfg.StateDir); err != nil {
			t.Error(err)
		}
	})
	e = openEngine(t, "", func(c *Config) { c.Spares = 4 })
	ctx := context.Background()
	parent, err := e.CreateSandbox(ctx, SandboxRequest{HostBase: true, Labels: map[string]string{"role": "parent"}})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, parent)
	if err := parent.OpenSession(ctx, api.SessionRequest{Name: "main"}); err != nil {
		t.Fatal(err)
	}
	sh(t, parent, "main", "mkdir -p /w && cd /w && echo one > f && echo doomed > del && export STEP=1")
	first, err := e.Fork(ctx, parent.ID(), api.ForkRequest{})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, first...)
	sh(t, first[0], "main", "echo first > /w/first.txt")
	waitPool(t, e, PoolFork, "1 ready", func(st warm.Stats) bool { return st.Spares == 1 && st.Making == 0 })
	if n := len(e.Sandboxes(nil)); n != 2 {
		t.Fatalf("%d live sandboxes with a spare ready: spares must not be live", n)
	}
	before := e.PoolStats()[PoolFork]

	sh(t, parent, "main", "echo two > f && rm del && export STEP=2")
	// Starts are in clock ticks (10 ms): two ticks between the spare's
	// shell and forkAt, so that it cannot start in forkAt's tick.
	time.Sleep(20 * time.Millisecond)
	forkAt := bootTicks(t)
	kids, err := e.Fork(ctx, parent.ID(), api.ForkRequest{Count: 2, Labels: map[string]string{"role": "child"}})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, kids...)
	st := e.PoolStats()[PoolFork]
	if st.Hits-before.Hits != 1 || st.Misses-before.Misses != 1 {
		t.Fatalf("a fork of 2 over 1 spare: %+v then %+v", before, st)
	}
	adopted := 0
	for _, k := range kids {
		started, err := strconv.ParseInt(strings.Fields(sh(t, k, "main", `read -r s </proc/$$/stat; s=${s##*) }; set -- $s; echo ${20}`))[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if started < forkAt {
			adopted++
		}
	}
	if adopted != 1 {
		t.Errorf("%d children's sessions in a shell started before the fork, want 1 (the spare's)", adopted)
	}
	for i, k := range kids {
		info := k.Info()
		if info.Labels["role"] != "child" || info.State != api.SandboxRunning {
			t.Fatalf("child %+v", info)
		}
		want := "/w 2 msb-" + k.ID()[:8] + "\ntwo\n"
		if got := sh(t, k, "main", `echo "$PWD $STEP $(hostname)"; cat f; ls /w/del /w/first.txt 2>/dev/null; true`); got != want {
			t.Fatalf("child %d (%s) sees %q, want %q", i, k.ID(), got, want)
		}
		sh(t, k, "", "echo mine > /w/kid"+k.ID()+" && echo tmp > /tmp/kid"+k.ID())
	}
	for _, s := range []*Sandbox{parent, kids[0], kids[1]} {
		for _, k := range kids {
			if s == k {
				continue
			}
			for _, f := range []string{"/w/kid" + k.ID(), "/tmp/kid" + k.ID()} {
				if _, err := s.Stat(ctx, f); !errors.Is(err, sandbox.ErrNotFound) {
					t.Errorf("%s sees %s: %v", s.ID(), f, err)
				}
			}
		}
	}
	// Back to creation: the fork's files (its sessions in their
	// defaults), not the spare's.
	for _, k := range kids {
		if _, err := e.Rollback(ctx, k.ID(), api.RollbackRequest{}); err != nil {
			t.Fatal(err)
		}
		if got := sh(t, k, "main", `cat /w/f; ls /w`); got != "two\nf\n" {
			t.Fatalf("child %s rolled back to creation sees %q", k.ID(), got)
		}
	}
	waitPool(t, e, PoolFork, "a refill to 2", func(st warm.Stats) bool { return st.Spares == 2 && st.Making == 0 })
	if got := sh(t, parent, "main", `echo "$PWD $STEP"; ls`); got != "/w 2\nf\n" {
		t.Fatalf("the parent sees %q", got)
	}
	if !strings.HasPrefix(parent.sbox().Hostname(), "msb-"+parent.ID()[:8]) {
		t.Fatalf("parent's host name %q", parent.sbox().Hostname())
	}
}

// bootTicks is the time since boot in clock ticks (USER_HZ, 100 on
// Linux), as /proc/<pid>/stat gives a process's start.
func bootTicks(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	secs, _, _ := strings.Cut(string(b), " ")
	f, err := strconv.ParseFloat(secs, 64)
	if err != nil {
		t.Fatal(err)
	}
	return int64(f * 100)
}
