package server

import (
	"context"
	"fmt"
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
// not, to every operation of the document get answers whose status,
// content type and body the document declares, and no 5xx. Path
// parameters name things that exist (a gym episode's task sandbox, its
// session, an instance, a cancelled job), so requests reach the handlers'
// logic instead of stopping at a 404. Bounded: 10 examples per operation
// and phase, loopback only. (The check that every schema-valid request is
// accepted is left out: a valid request for an unknown id is a 404.)
func TestPythonSchemathesis(t *testing.T) {
	py := python(t)
	d := startDaemon(t, func(c *engine.Config) {
		c.MaxSandboxes, c.Lifetime, c.IdleTimeout = 8, time.Minute, 20*time.Second
		c.Limits.MemoryBytes = 256 << 20
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	inst := generated(t).Instances[0].InstanceID
	// The episode every operation works on; the operations that end a
	// sandbox get ones of their own, so the others find it live.
	episode := func() api.GymObservation {
		var obs api.GymObservation
		if err := d.unix.Call(ctx, "POST", "/v1/gym/reset", api.GymResetRequest{InstanceID: inst, LifetimeNs: int64(10 * time.Minute), IdleTimeoutNs: int64(10 * time.Minute)}, &obs); err != nil {
			t.Fatal(err)
		}
		return obs
	}
	obs, submitted, deleted := episode(), episode(), episode()
	var job api.Job
	if err := d.unix.Call(ctx, "POST", "/v1/jobs", api.JobRequest{Kind: api.JobValidation, RunID: "fuzz", InstanceIDs: []string{inst}, Workers: 1}, &job); err != nil {
		t.Fatal(err)
	}
	if err := d.unix.Call(ctx, "DELETE", "/v1/jobs/"+job.ID, nil, &job); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "schemathesis.toml")
	params := fmt.Sprintf("[parameters]\n\"path.id\" = %q\n\"path.name\" = %q\n\"path.instance_id\" = %q\n\"path.job_id\" = %q\n",
		obs.SandboxID, obs.Session, inst, job.ID)
	for op, id := range map[string]string{"POST /v1/gym/{id}/submit": submitted.SandboxID, "DELETE /v1/sandboxes/{id}": deleted.SandboxID} {
		params += fmt.Sprintf("\n[[operations]]\ninclude-name = %q\nparameters = { \"path.id\" = %q }\n", op, id)
	}
	if err := os.WriteFile(config, []byte(params), 0o644); err != nil {
		t.Fatal(err)
	}
	st := filepath.Join(filepath.Dir(py), "schemathesis")
	cmd := exec.CommandContext(ctx, st, "--config-file", config, "run", d.tcp+"/v1/openapi.json", "-H", "Authorization: Bearer "+testToken,
		"-n", "10", "--seed", "1", "--phases", "examples,coverage,fuzzing", "--checks", "all", "--exclude-checks", "positive_data_acceptance",
		"--request-timeout", "60", "-w", "2", "--no-color")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("schemathesis: %v\n%s", err, out)
	}
	// Every operation of the document was tried.
	if n := len(New(d.e, Options{}).routes()); !strings.Contains(string(out), fmt.Sprintf("Tested: %d", n)) {
		t.Fatalf("schemathesis did not test the %d operations:\n%s", n, out)
	}
	t.Logf("schemathesis: %s", lastLine(string(out)))
}
