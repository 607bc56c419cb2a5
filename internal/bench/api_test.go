package bench

import (
	"context"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/client"
)

// TestDaemonMemoryCountsSandboxes checks that the API benchmark's memory
// per sandbox counts every process of a sandbox (its supervisor, init and
// session shell), not the daemon's own memory alone: a sandbox with a
// session adds processes and PSS to what daemonMemory counts.
func TestDaemonMemoryCountsSandboxes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs msb serve")
	}
	exe, args := buildMSB(t)
	ctx := context.Background()
	d, err := startServe(ctx, APIOptions{Exe: exe, StateDir: args[1]})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.stop(); err != nil {
			t.Errorf("msb serve: %v: %s", err, d.log.String())
		}
	}()
	c, err := client.New("unix://"+d.sock, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pssBefore, procsBefore := daemonMemory(d.cmd.Process.Pid)
	sb, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSandbox(ctx, sb.ID)
	if err := c.OpenSession(ctx, sb.ID, api.SessionRequest{Name: "bench"}); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Exec(ctx, sb.ID, api.ExecRequest{Session: "bench", Command: "true"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	pssAfter, procsAfter := daemonMemory(d.cmd.Process.Pid)
	// at least the supervisor (or init) and the session's shell
	if procsAfter < procsBefore+2 || pssAfter <= pssBefore {
		t.Errorf("a sandbox with a session took the daemon's tree from %d to %d processes and %d to %d bytes of PSS: its own processes are not counted",
			procsBefore, procsAfter, pssBefore, pssAfter)
	}
}
