package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/client"
	"github.com/minisandbox/msb/internal/privtest"
)

// startServe runs msb serve with args until the test ends, then stops it
// with SIGTERM and checks that it exited 0 and left nothing behind.
func startServe(t *testing.T, ready func() bool, env []string, args ...string) {
	t.Helper()
	cmd := msbCmd(t, t.TempDir(), env, append([]string{"serve"}, args...)...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); !ready(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("msb serve did not come up:\n%s", logs.String())
		}
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		err := cmd.Wait()
		if err != nil {
			t.Errorf("msb serve after SIGTERM: %v\n%s", err, logs.String())
		}
		if !strings.Contains(logs.String(), "msg=stopped") {
			t.Errorf("no clean stop in the log:\n%s", logs.String())
		}
	})
}

// TestServeClientVerbs: msb serve on a unix socket, driven by the client
// verbs; SIGTERM closes every sandbox and removes the socket.
func TestServeClientVerbs(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "msb.sock")
	c, _ := client.New("unix://"+sock, "")
	defer c.Close()
	up := func() bool { _, err := c.Health(context.Background()); return err == nil }
	env := []string{"MSB_SOCKET=unix://" + sock}
	t.Run("serve", func(t *testing.T) {
		startServe(t, up, env, "--listen", "unix://"+sock, "--idle-timeout", "1h")
		r := msb(t, dir, env, "sandbox", "create", "--label", "job=cli")
		if r.code != 0 {
			t.Fatalf("create: %+v", r)
		}
		id := strings.TrimSpace(r.stdout)
		if r := msb(t, dir, env, "sandbox", "ls", "--label", "job=cli"); r.code != 0 || !strings.Contains(r.stdout, id) {
			t.Fatalf("ls: %+v", r)
		}
		if r := msb(t, dir, env, "exec", id, "--", "sh", "-c", "echo out; echo err >&2; exit 5"); r.code != 5 || r.stdout != "out\n" || r.stderr != "err\n" {
			t.Fatalf("exec: %+v", r)
		}
		if r := msb(t, dir, env, "--json", "exec", id, "--", "echo $((6*7))"); r.code != 0 || !strings.Contains(r.stdout, `"stdout": "42\n"`) {
			t.Fatalf("exec --json: %+v", r)
		}
		for _, args := range [][]string{{"session", "open", id, "main"}, {"session", "exec", id, "main", "--", "cd /tmp; X=9"}} {
			if r := msb(t, dir, env, args...); r.code != 0 {
				t.Fatalf("%v: %+v", args, r)
			}
		}
		if r := msb(t, dir, env, "session", "exec", id, "main", "--", "echo $PWD $X"); r.stdout != "/tmp 9\n" {
			t.Fatalf("session state: %+v", r)
		}
		local := filepath.Join(dir, "tree")
		os.MkdirAll(filepath.Join(local, "sub"), 0o755)
		os.WriteFile(filepath.Join(local, "sub", "f.txt"), []byte("data"), 0o644)
		if r := msb(t, dir, env, "cp", local, id+":/tmp/tree"); r.code != 0 {
			t.Fatalf("cp up: %+v", r)
		}
		if r := msb(t, dir, env, "cp", id+":/tmp/tree", filepath.Join(dir, "back")); r.code != 0 {
			t.Fatalf("cp down: %+v", r)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "back", "sub", "f.txt")); err != nil || string(b) != "data" {
			t.Fatalf("copied back: %v %q", err, b)
		}
		if r := msb(t, dir, env, "exec", "nope", "--", "true"); r.code != exitUsage || !strings.Contains(r.stderr, "not found") {
			t.Fatalf("unknown sandbox: %+v", r)
		}
		// The daemon's errors: its message, an exit code by its error code
		// (a conflict is a failed operation, not a usage error), no HTTP.
		r = msb(t, dir, env, "session", "open", id, "main")
		if r.code != exitFailure || !strings.Contains(r.stderr, "already exists") || strings.Contains(r.stderr, "usage") || strings.Contains(r.stderr, "409") {
			t.Fatalf("session open twice: %+v", r)
		}
		for _, tc := range []struct {
			args []string
			code api.ErrorCode
			exit int
		}{
			{[]string{"--json", "session", "open", id, "main"}, api.CodeConflict, exitFailure},
			{[]string{"--json", "exec", "nope", "--", "true"}, api.CodeNotFound, exitUsage},
		} {
			r := msb(t, dir, env, tc.args...)
			var e api.CLIError
			if err := json.Unmarshal([]byte(r.stderr), &e); err != nil || e.Error.Code != string(tc.code) || r.code != tc.exit || e.Error.ExitCode != tc.exit {
				t.Fatalf("%v: %+v (%v)", tc.args, r, err)
			}
		}
		// Left open on purpose: SIGTERM must close it.
	})
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left after SIGTERM: %v", err)
	}
	if r := msb(t, dir, env, "sandbox", "ls"); r.code == 0 {
		t.Fatalf("ls without a daemon: %+v", r)
	}
}

// TestServeSwerexDeployment: msb serve --swerex with swerex-remote's flags,
// driven by SWE-ReX's RemoteDeployment as SWE-agent's remote deployment
// drives it.
func TestServeSwerexDeployment(t *testing.T) {
	py := privtest.Python(t, "SWE-ReX's RemoteDeployment")
	g, env := demoFixture(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	c, _ := client.New("http://127.0.0.1:"+strconv.Itoa(port), "tok")
	defer c.Close()
	up := func() bool { _, err := c.Health(context.Background()); return err == nil }
	t.Run("serve", func(t *testing.T) {
		startServe(t, up, env, "--swerex", "--instance", g.Instances[0].InstanceID, "--dataset", g.DatasetPath, "--spec", g.SpecPath,
			"--host", "127.0.0.1", "--port", strconv.Itoa(port), "--auth-token", "tok", "--listen", "unix://"+filepath.Join(t.TempDir(), "s.sock"))
		cmd := exec.Command(py, "../server/testdata/swe_agent_deployment.py", "http://127.0.0.1", strconv.Itoa(port), "tok", t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ok swe-agent deployment") {
			t.Fatalf("%v\n%s", err, out)
		}
	})
}
