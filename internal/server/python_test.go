package server

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
)

// python returns the test venv's interpreter, or skips (fails when the
// suite is strict).
func python(t *testing.T) string {
	t.Helper()
	py := privtest.Python(t, "SWE-ReX's client and schemathesis (internal/server/testdata/requirements.txt)")
	if out, err := exec.Command(py, "-c", "import swerex, schemathesis").CombinedOutput(); err != nil {
		privtest.Skip(t, "%s=%s lacks the test requirements: %v %s", privtest.PythonEnv, py, err, out)
	}
	return py
}

func runPython(t *testing.T, py string, timeout time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, args...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", py, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestPythonSWEReX drives every SWE-ReX route through SWE-ReX's own
// RemoteRuntime (PyPI swe-rex 1.4.0): for a sandbox of the daemon at
// /swerex/{id}, and at the root of a daemon serving one sandbox as
// msb serve --swerex does.
func TestPythonSWEReX(t *testing.T) {
	py := python(t)
	d := startDaemon(t, nil, nil)
	info, err := d.unix.CreateSandbox(context.Background(), api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join("testdata", "swerex_client.py")
	out := runPython(t, py, 5*time.Minute, script, d.tcp+"/swerex/"+info.ID, testToken, t.TempDir())
	if !strings.Contains(out, "\nok ") && !strings.HasPrefix(out, "ok ") {
		t.Fatalf("no ok line:\n%s", out)
	}
	t.Logf("through /swerex/{id}: %s", lastLine(out))

	// The root routes of a daemon for one sandbox (a task sandbox here).
	root := startDaemon(t, nil, func(o *Options) {})
	sb, err := root.e.CreateSandbox(context.Background(), engine.SandboxRequest{InstanceID: generated(t).Instances[0].InstanceID, Lifetime: -1, IdleTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	rs := New(root.e, Options{Token: testToken, RootSandbox: sb.ID()})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rs.Serve(ctx, l) }()
	defer func() { cancel(); <-done }()
	out = runPython(t, py, 5*time.Minute, script, "http://"+l.Addr().String(), testToken, t.TempDir())
	t.Logf("at the root: %s", lastLine(out))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestPythonSchemathesis checks the served OpenAPI document against the
// routes with schemathesis (PyPI, pinned): generated requests, valid and
// not, get answers whose status, content type and body the document
// declares, and no 5xx. (Its check that every schema-valid request is
// accepted is left out: a valid request for an unknown id is a 404.)
func TestPythonSchemathesis(t *testing.T) {
	py := python(t)
	d := startDaemon(t, func(c *engine.Config) {
		c.MaxSandboxes, c.Lifetime, c.IdleTimeout = 8, time.Minute, 20*time.Second
		c.Limits.MemoryBytes = 256 << 20
	}, nil)
	st := filepath.Join(filepath.Dir(py), "schemathesis")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, st, "run", d.tcp+"/v1/openapi.json", "-H", "Authorization: Bearer "+testToken,
		"-n", "10", "--seed", "1", "--phases", "examples,coverage,fuzzing", "--exclude-checks", "positive_data_acceptance",
		"--request-timeout", "60", "-w", "2", "--no-color")
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("schemathesis: %v\n%s", err, out)
	}
	t.Logf("schemathesis: %s", lastLine(string(out)))
}
