package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/client"
	"github.com/minisandbox/msb/internal/privtest"
)

// TestGCLeavesOtherOwners: two daemons (each its own state dir) with a
// sandbox each, and a msb run holding a sandbox open; msb gc in each of the
// three state dirs and a daemon starting on the msb run's state dir collect
// nothing, and every sandbox still answers.
func TestGCLeavesOtherOwners(t *testing.T) {
	dir := t.TempDir()
	var ids, envs [2][]string
	for i := range 2 {
		sock := filepath.Join(dir, "d"+string(rune('a'+i))+".sock")
		env := []string{"MSB_SOCKET=unix://" + sock, "MSB_STATE_DIR=" + privtest.StateDir(t)}
		c, _ := client.New("unix://"+sock, "")
		defer c.Close()
		startServe(t, func() bool { _, err := c.Health(context.Background()); return err == nil }, env, "--listen", "unix://"+sock)
		r := msb(t, dir, env, "sandbox", "create")
		if r.code != 0 {
			t.Fatalf("create in daemon %d: %+v", i, r)
		}
		ids[i], envs[i] = []string{strings.TrimSpace(r.stdout)}, env
	}
	runState := privtest.StateDir(t)
	runEnv := []string{"MSB_STATE_DIR=" + runState}
	held := msbCmd(t, dir, runEnv, "run", "--", "sh", "-c", "echo up; read x; echo done")
	stdin, _ := held.StdinPipe()
	stdout, _ := held.StdoutPipe()
	if err := held.Start(); err != nil {
		t.Fatal(err)
	}
	defer held.Process.Kill()
	up := make([]byte, 3)
	if _, err := io.ReadFull(stdout, up); err != nil || string(up) != "up\n" {
		t.Fatalf("msb run did not start: %q %v", up, err)
	}

	for _, env := range [][]string{envs[0], envs[1], runEnv} {
		if r := msb(t, dir, env, "--json", "gc"); r.code != 0 || !strings.Contains(r.stdout, `"sandboxes": []`) {
			t.Fatalf("gc with %v: %+v", env, r)
		}
	}
	// A daemon starting on the msb run's state dir runs its own gc.
	sock := filepath.Join(dir, "late.sock")
	late, _ := client.New("unix://"+sock, "")
	defer late.Close()
	t.Run("late daemon", func(t *testing.T) {
		startServe(t, func() bool { _, err := late.Health(context.Background()); return err == nil },
			append(runEnv, "MSB_SOCKET=unix://"+sock), "--listen", "unix://"+sock)
	})

	for i := range 2 {
		if r := msb(t, dir, envs[i], "exec", ids[i][0], "--", "echo", "alive"); r.code != 0 || r.stdout != "alive\n" {
			t.Fatalf("daemon %d's sandbox after the others' gc: %+v", i, r)
		}
	}
	io.WriteString(stdin, "go\n")
	stdin.Close()
	rest, _ := io.ReadAll(stdout)
	if err := held.Wait(); err != nil || string(rest) != "done\n" {
		t.Fatalf("msb run after the others' gc: %v, output %q", err, rest)
	}
}

// TestGCLeavesOtherOwnersRootless is TestGCLeavesOtherOwners as an
// unprivileged user (rootless daemons and msb run).
func TestGCLeavesOtherOwnersRootless(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the root run of this test reruns it so")
	}
	privtest.Unprivileged(t, "^TestGCLeavesOtherOwners$")
}
