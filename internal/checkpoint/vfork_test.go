package checkpoint

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
)

// TestFreezeForDumpVfork: a sandbox whose python3 posix_spawns a sleep
// (glibc's clone with CLONE_VFORK) whose child waits, before its exec, to
// open a FIFO no one writes: the parent waits in the kernel's vfork wait,
// which no ptrace stop interrupts, and a dump of the sandbox frozen then
// failed after criu's 10 s timeout ("Unseizable non-zombie ... state D").
// FreezeForDump does not return such a freeze: with no writer it fails
// with ErrVforkChild once the child had vforkWait to exec, naming it,
// and the sandbox runs on; once a command opens the FIFO (in a moment
// the sandbox is thawed), the child execs, FreezeForDump returns frozen
// and the dump succeeds.
func TestFreezeForDumpVfork(t *testing.T) {
	privtest.RequireRoot(t)
	criu := testCriu(t)
	rt, _ := newTestRuntime(t, testDiskDir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb := createDumpable(ctx, t, rt, sandbox.Config{HostBase: true, Network: sandbox.NetworkHost})
	defer sb.Close()
	startCounter(ctx, t, sb, `mkfifo /tmp/gate && setsid python3 -c '
import os
pid = os.posix_spawn("/bin/sleep", ["sleep", "1000"], {},
    file_actions=[(os.POSIX_SPAWN_OPEN, 0, "/tmp/gate", os.O_RDONLY, 0)])
os.waitpid(pid, 0)
' </dev/null >/dev/null 2>&1 &`)
	var child int
	for end := time.Now().Add(10 * time.Second); child == 0; {
		c, _, err := vforkChild(sb.InitPid())
		if err != nil {
			t.Fatal(err)
		}
		if child = c; c == 0 && time.Now().After(end) {
			t.Fatal("no vfork child in the sandbox after 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("vfork child %d (%s)", child, comm(child))

	t0 := time.Now()
	thaw, err := FreezeForDump(ctx, sb)
	if terr := thaw(); terr != nil {
		t.Fatal(terr)
	}
	if !errors.Is(err, ErrVforkChild) {
		t.Fatalf("FreezeForDump with a vfork child that does not exec: %v, want ErrVforkChild", err)
	}
	if took := time.Since(t0); took < vforkWait {
		t.Errorf("FreezeForDump gave up after %v, before the child had %v to exec", took, vforkWait)
	}
	t.Logf("FreezeForDump: %v", err)
	if res, err := sb.Exec(ctx, session.ExecRequest{Command: "true", Timeout: 10 * time.Second}); err != nil || res.ExitCode != 0 {
		t.Fatalf("the sandbox after the failed freeze: %v %+v", err, res)
	}

	// The FIFO is opened once FreezeForDump has frozen the sandbox and
	// found the child: the command runs while it waits, thawed, which
	// a loaded host may make slow: the wait is longer here.
	defer func(w time.Duration) { vforkWait = w }(vforkWait)
	vforkWait = 8 * time.Second
	opened := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		res, err := sb.Exec(ctx, session.ExecRequest{Command: "echo > /tmp/gate", Timeout: 10 * time.Second})
		if err == nil && res.ExitCode != 0 {
			err = errors.New(res.Output)
		}
		opened <- err
	}()
	thaw, err = FreezeForDump(ctx, sb)
	var man *Manifest
	if err == nil {
		man, err = criu.DumpSandbox(ctx, sb, t.TempDir())
	}
	if terr := thaw(); terr != nil {
		t.Fatal(terr)
	}
	if err != nil {
		t.Fatalf("freezing and dumping once the child can exec: %v", err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("opening the FIFO: %v", err)
	}
	if c, _, err := vforkChild(man.Init); err != nil || c != 0 {
		t.Errorf("a vfork child after the dump: %d %v", c, err)
	}
}
