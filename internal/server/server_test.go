package server

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/client"
	"github.com/minisandbox/msb/internal/engine"
)

// raw sends a request and returns the status and body (for what the Go
// client does not expose: bad bodies, missing tokens).
func raw(t *testing.T, c *http.Client, method, url, token, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func wantCode(t *testing.T, err error, code api.ErrorCode) {
	t.Helper()
	if !client.IsCode(err, code) {
		t.Fatalf("want %s, got %v", code, err)
	}
}

// errCode is the code of an error body, or "" when b is not one.
func errCode(b []byte) api.ErrorCode {
	var eb api.ErrorBody
	json.Unmarshal(b, &eb)
	return eb.Error.Code
}

// TestServerSandboxes drives a raw sandbox through the daemon: create with
// labels, list, exec with cwd/env/stdin and a command past ARG_MAX,
// streaming, sessions and interrupt, files and tars, paths that try to
// leave the root, delete and what a closed sandbox answers.
func TestServerSandboxes(t *testing.T) {
	d := startDaemon(t, nil, nil)
	ctx := context.Background()
	c := d.unix
	h, err := c.Health(ctx)
	if err != nil || h.Status != "ok" || h.Mode == "" {
		t.Fatalf("health %v %+v", err, h)
	}
	info, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Labels: map[string]string{"job": "t"}, Limits: api.Limits{MemoryBytes: 512 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	id := info.ID
	if info.State != api.SandboxRunning || info.Limits.MemoryBytes != 512<<20 || info.IdleTimeoutNs != 0 {
		t.Fatalf("info %+v", info)
	}
	if l, err := c.Sandboxes(ctx, map[string]string{"job": "t"}); err != nil || len(l) != 1 || l[0].ID != id {
		t.Fatalf("list %v %+v", err, l)
	}
	if l, err := d.remote.Sandboxes(ctx, map[string]string{"job": "other"}); err != nil || len(l) != 0 {
		t.Fatalf("list other %v %+v", err, l)
	}
	res, err := c.Exec(ctx, id, api.ExecRequest{Command: `echo "$PWD $A"; cat; echo e >&2; exit 4`, Cwd: "/usr", Env: []string{"A=b"}, Stdin: "in", SeparateStderr: true})
	if err != nil || res.Stdout != "/usr b\nin" || res.Stderr != "e\n" || res.ExitCode != 4 {
		t.Fatalf("exec %v %+v", err, res)
	}
	big := "x='" + strings.Repeat("y", 2<<20) + "'; echo ${#x}"
	if res, err := d.remote.Exec(ctx, id, api.ExecRequest{Command: big}); err != nil || res.Stdout != "2097152\n" {
		t.Fatalf("2 MiB command over TCP: %v %q", err, res.Stdout)
	}
	if res, err := c.Exec(ctx, id, api.ExecRequest{Command: "sleep 10", TimeoutNs: int64(200 * time.Millisecond)}); err != nil || !res.TimedOut {
		t.Fatalf("timeout %v %+v", err, res)
	}
	var chunks []string
	res, err = c.ExecStream(ctx, id, api.ExecRequest{Command: "echo a; sleep 0.2; echo b"}, func(ev api.ExecEvent) { chunks = append(chunks, ev.Data) })
	if err != nil || res.Stdout != "a\nb\n" || strings.Join(chunks, "") != "a\nb\n" || len(chunks) < 2 {
		t.Fatalf("stream %v %+v %q", err, res, chunks)
	}

	// Sessions: state persists; an interrupt stops the running command.
	if err := c.OpenSession(ctx, id, api.SessionRequest{Name: "main"}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, c.OpenSession(ctx, id, api.SessionRequest{Name: "main"}), api.CodeConflict)
	if _, err := c.Exec(ctx, id, api.ExecRequest{Session: "main", Command: "cd /tmp; export V=1"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan api.ExecResult, 1)
	go func() {
		res, err := c.Exec(ctx, id, api.ExecRequest{Session: "main", Command: "echo begun; sleep 60"})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	for {
		ok, err := d.remote.InterruptSession(ctx, id, "main")
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if res := <-done; !res.TimedOut {
		t.Fatalf("interrupted %+v", res)
	}
	if res, err := c.Exec(ctx, id, api.ExecRequest{Session: "main", Command: "echo $PWD $V"}); err != nil || res.Stdout != "/tmp 1\n" {
		t.Fatalf("after interrupt %v %+v", err, res)
	}
	// An interactive command: python3 reads lines from its terminal until
	// an interrupt (idle, at its prompt) ends it; the shell's state stays.
	py := api.ExecRequest{Session: "main", Command: "python3 -q", Interactive: true, Expect: []string{">>> "}, TimeoutNs: int64(time.Minute)}
	if res, err := c.Exec(ctx, id, py); err != nil || !res.Running || res.Matched != ">>> " {
		t.Fatalf("python3 %v %+v", err, res)
	}
	if res, err := c.Exec(ctx, id, api.ExecRequest{Session: "main", Command: "print(6*7)\n", Input: true, Expect: []string{">>> "}}); err != nil || !res.Running || res.Stdout != "42\n" {
		t.Fatalf("input %v %+v", err, res)
	}
	_, err = c.Exec(ctx, id, api.ExecRequest{Session: "main", Command: "true"})
	wantCode(t, err, api.CodeBadRequest)
	_, err = c.Exec(ctx, id, api.ExecRequest{Command: "true", Interactive: true})
	wantCode(t, err, api.CodeBadRequest)
	if ok, err := c.InterruptSession(ctx, id, "main"); err != nil || !ok {
		t.Fatalf("interrupt of the waiting python3: %v %v", ok, err)
	}
	_, err = c.Exec(ctx, id, api.ExecRequest{Session: "main", Command: "x\n", Input: true})
	wantCode(t, err, api.CodeBadRequest)
	if res, err := c.Exec(ctx, id, api.ExecRequest{Session: "main", Command: "echo $PWD $V"}); err != nil || res.Stdout != "/tmp 1\n" {
		t.Fatalf("after python3 %v %+v", err, res)
	}
	if res, err := c.Exec(ctx, id, api.ExecRequest{Session: "main", Command: "exit 7"}); err != nil || !res.SessionEnded || res.ExitCode != 7 {
		t.Fatalf("exit %v %+v", err, res)
	}
	_, err = c.Exec(ctx, id, api.ExecRequest{Session: "main", Command: "true"})
	wantCode(t, err, api.CodeSessionEnded)

	// Files.
	if err := c.WriteFile(ctx, id, "/work/dir/a.txt", []byte("hello\x00\xff"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := c.ReadFile(ctx, id, "/work/dir/a.txt"); err != nil || string(b) != "hello\x00\xff" {
		t.Fatalf("read %v %q", err, b)
	}
	if fe, err := c.Stat(ctx, id, "/work/dir/a.txt"); err != nil || fe.Size != 7 || fe.Mode&0o777 != 0o600 || fe.Type != "file" {
		t.Fatalf("stat %v %+v", err, fe)
	}
	if ents, err := c.ListDir(ctx, id, "/work/dir"); err != nil || len(ents) != 1 || ents[0].Name != "a.txt" {
		t.Fatalf("list %v %+v", err, ents)
	}
	_, err = c.Stat(ctx, id, "/work/nope")
	wantCode(t, err, api.CodeNotFound)
	tb, err := c.GetTar(ctx, id, "/work")
	if err != nil || !tarHas(t, tb, "a.txt") {
		t.Fatalf("get tar %v", err)
	}
	if err := c.PutTar(ctx, id, "/copy", tb); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Exec(ctx, id, api.ExecRequest{Command: "find /copy -type f"}); err != nil || !strings.Contains(res.Stdout, "a.txt") {
		t.Fatalf("put tar %v %+v", err, res)
	}
	// A host file outside the sandbox stays out of reach, through ".."
	// and through a symlink the agent planted.
	secret := filepath.Join(d.dir, "host-secret")
	os.WriteFile(secret, []byte("host"), 0o644)
	if _, err := c.ReadFile(ctx, id, "/../../.."+secret); !client.IsCode(err, api.CodeNotFound) {
		t.Fatalf("dot-dot read: %v", err)
	}
	if _, err := c.Exec(ctx, id, api.ExecRequest{Command: "mkdir -p /l && ln -sf " + secret + " /l/s && ln -sfn / /l/root"}); err != nil {
		t.Fatal(err)
	}
	if b, err := c.ReadFile(ctx, id, "/l/s"); err == nil {
		t.Fatalf("read a host file through a symlink: %q", b)
	}
	if err := c.WriteFile(ctx, id, "/l/s", []byte("x"), 0); err == nil {
		if b, _ := os.ReadFile(secret); string(b) != "host" {
			t.Fatalf("wrote the host file through a symlink: %q", b)
		}
	}

	// Errors in the one shape.
	hc := &http.Client{Transport: &http.Transport{}}
	st, b := raw(t, hc, "GET", d.tcp+"/v1/sandboxes", "", "")
	if st != 401 || errCode(b) != api.CodeUnauthorized {
		t.Fatalf("no token: %d %s", st, b)
	}
	st, b = raw(t, hc, "GET", d.tcp+"/v1/sandboxes", "wrong", "")
	if st != 401 || errCode(b) != api.CodeUnauthorized {
		t.Fatalf("wrong token: %d %s", st, b)
	}
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               api.ErrorCode
	}{
		{"POST", "/v1/sandboxes", "{", 400, api.CodeBadRequest},
		{"POST", "/v1/sandboxes", `{"limitz":{}}`, 400, api.CodeBadRequest},
		{"POST", "/v1/sandboxes", `{"limits":{"memory_bytes":-1}}`, 400, api.CodeBadRequest},
		{"POST", "/v1/sandboxes", `{"instance_id":"nope"}`, 404, api.CodeNotFound},
		{"POST", "/v1/sandboxes/" + id + "/exec", `{"command":"true","env":["=x"]}`, 400, api.CodeBadRequest},
		{"GET", "/v1/sandboxes/" + id + "/diff", "", 409, api.CodeNoInstance},
		{"GET", "/v1/sandboxes/" + id + "/files?path=relative", "", 400, api.CodeBadRequest},
		{"GET", "/v1/sandboxes/nope", "", 404, api.CodeNotFound},
		{"PATCH", "/v1/sandboxes", "", 405, api.CodeMethodNotAllowed},
		{"GET", "/v1/nowhere", "", 404, api.CodeNotFound},
		{"POST", "/v1/sandboxes/" + id + "/exec", `{"command":"` + strings.Repeat("x", 65<<20) + `"}`, 413, api.CodeBodyTooLarge},
	} {
		st, b := raw(t, hc, tc.method, d.tcp+tc.path, testToken, tc.body)
		if st != tc.status || errCode(b) != tc.code {
			t.Errorf("%s %s: %d %.200s, want %d %s", tc.method, tc.path, st, b, tc.status, tc.code)
		}
	}

	if info, err := c.DeleteSandbox(ctx, id); err != nil || info.State != api.SandboxClosed {
		t.Fatalf("delete %v %+v", err, info)
	}
	if info, err := c.Sandbox(ctx, id); err != nil || info.State != api.SandboxClosed || info.ClosedAt == "" {
		t.Fatalf("get closed %v %+v", err, info)
	}
	_, err = c.Exec(ctx, id, api.ExecRequest{Command: "true"})
	wantCode(t, err, api.CodeGone)
	st, b = raw(t, hc, "GET", d.tcp+"/metrics", testToken, "")
	for _, m := range []string{"msb_sandboxes_live 0", `msb_sandboxes_created_total{kind="raw"} 1`, `msb_pool_spares{kind="instance",state="ready"} 0`, `msb_pool_total{event="hit",kind="image"} 0`, `msb_exec_seconds_count{kind="session"}`, "go_goroutines"} {
		if st != 200 || !strings.Contains(string(b), m) {
			t.Errorf("metrics lack %q", m)
		}
	}
}

func tarHas(t *testing.T, tb []byte, name string) bool {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(tb))
	for {
		h, err := tr.Next()
		if err != nil {
			return false
		}
		if strings.HasSuffix(h.Name, name) {
			return true
		}
	}
}

// TestServerQuota: over the daemon's bound a create is quota_exceeded at
// once (429), waits when asked, and a limit above the whole budget is
// insufficient_storage (507); a reaped sandbox says why.
func TestServerQuota(t *testing.T) {
	d := startDaemon(t, func(c *engine.Config) { c.MaxSandboxes = 1; c.MemoryBudget = 2 << 30 }, nil)
	ctx := context.Background()
	c := d.unix
	a, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Limits: api.Limits{MemoryBytes: 256 << 20}, IdleTimeoutNs: int64(300 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateSandbox(ctx, api.CreateSandboxRequest{Limits: api.Limits{MemoryBytes: 256 << 20}})
	wantCode(t, err, api.CodeQuotaExceeded)
	if e := (*client.Error)(nil); !asError(err, &e) || e.Status != 429 {
		t.Fatalf("status of %v", err)
	}
	_, err = c.CreateSandbox(ctx, api.CreateSandboxRequest{Limits: api.Limits{MemoryBytes: 4 << 30}})
	wantCode(t, err, api.CodeTooLarge)
	if n := len(d.e.Sandboxes(nil)); n != 1 {
		t.Fatalf("%d sandboxes after refusals", n)
	}
	// The idle one is reaped; a waiting create gets its place.
	b, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Limits: api.Limits{MemoryBytes: 256 << 20}, AdmissionWaitNs: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Sandbox(ctx, a.ID)
	if err != nil || info.State != api.SandboxReaped || info.Reason != api.ReapIdle {
		t.Fatalf("reaped: %v %+v", err, info)
	}
	_, err = c.Exec(ctx, a.ID, api.ExecRequest{Command: "true"})
	if !client.IsCode(err, api.CodeGone) || !strings.Contains(err.Error(), "idle") {
		t.Fatalf("exec on reaped: %v", err)
	}
	if _, err := c.DeleteSandbox(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
}

func asError(err error, target **client.Error) bool {
	e, ok := err.(*client.Error)
	*target = e
	return ok
}

// TestServerTask: a task sandbox for an instance, its diff, evaluation in a
// fresh sandbox, the gym loop and a batch job writing the harness's files.
func TestServerTask(t *testing.T) {
	d := startDaemon(t, nil, nil)
	ctx := context.Background()
	c := d.unix
	g := generated(t)
	in := g.Instances[0]
	var list api.InstanceList
	if err := c.Call(ctx, "GET", "/v1/instances", nil, &list); err != nil || len(list.InstanceIDs) != len(g.Instances) {
		t.Fatalf("instances %v %+v", err, list)
	}
	var ii api.InstanceInfo
	if err := c.Call(ctx, "GET", "/v1/instances/"+in.InstanceID, nil, &ii); err != nil || ii.ProblemStatement != in.ProblemStatement || ii.Spec.Digest == "" {
		t.Fatalf("instance %v %+v", err, ii)
	}
	info, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{InstanceID: in.InstanceID})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFile(ctx, info.ID, "/testbed/fix.patch", []byte(in.Patch), 0); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Exec(ctx, info.ID, api.ExecRequest{Command: "cd /testbed && git apply fix.patch && rm fix.patch"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("apply %v %+v", err, res)
	}
	patch, err := c.Diff(ctx, info.ID)
	if err != nil || !strings.Contains(patch, "diff --git") {
		t.Fatalf("diff %v %q", err, patch)
	}
	ev, err := c.Evaluate(ctx, info.ID, api.EvaluateRequest{Model: "agent", Artifacts: true, Repeat: 2})
	if err != nil || ev.Result.Outcome != api.OutcomeResolved || ev.Result.Reward != 1 || !ev.Result.Report.Resolved || ev.Artifacts == nil || ev.Artifacts.TestOutput == "" ||
		ev.Result.Runs != 2 || ev.Result.Flaky {
		t.Fatalf("evaluate %v %+v", err, ev.Result)
	}
	empty := ""
	if ev, err := c.Evaluate(ctx, info.ID, api.EvaluateRequest{Patch: &empty}); err != nil || ev.Result.Outcome != api.OutcomeEmptyPatch {
		t.Fatalf("evaluate empty %v %+v", err, ev.Result)
	}
	if _, err := c.DeleteSandbox(ctx, info.ID); err != nil {
		t.Fatal(err)
	}

	// Gym: reset, steps, submit.
	var obs api.GymObservation
	if err := c.Call(ctx, "POST", "/v1/gym/reset", api.GymResetRequest{InstanceID: in.InstanceID}, &obs); err != nil || obs.SandboxID == "" || obs.ProblemStatement == "" {
		t.Fatalf("reset %v %+v", err, obs)
	}
	var step api.GymStep
	if err := c.Call(ctx, "POST", "/v1/gym/"+obs.SandboxID+"/step", api.GymStepRequest{Command: "pwd"}, &step); err != nil || step.Observation.Stdout != "/testbed\n" || step.Done {
		t.Fatalf("step %v %+v", err, step)
	}
	if err := c.Call(ctx, "POST", "/v1/gym/"+obs.SandboxID+"/step", api.GymStepRequest{Command: "echo " + api.SubmitMarker}, &step); err != nil || !step.Done {
		t.Fatalf("submit step %v %+v", err, step)
	}
	var sub api.GymSubmitResult
	if err := c.Call(ctx, "POST", "/v1/gym/"+obs.SandboxID+"/submit", api.GymSubmitRequest{Patch: &in.Patch, Repeat: 2}, &sub); err != nil || sub.Reward != 1 || !sub.Done || sub.Result.Runs != 2 || sub.Flaky {
		t.Fatalf("submit %v %+v", err, sub)
	}
	if info, err := c.Sandbox(ctx, obs.SandboxID); err != nil || info.State != api.SandboxClosed {
		t.Fatalf("after submit %v %+v", err, info)
	}

	// A batch job: gold patches of two instances, the harness's files.
	var job api.Job
	ids := []string{g.Instances[0].InstanceID, g.Instances[1].InstanceID}
	if err := c.Call(ctx, "POST", "/v1/jobs", api.JobRequest{RunID: "gold", InstanceIDs: ids, Gold: true, Repeat: 2}, &job); err != nil || job.State != api.JobRunning {
		t.Fatalf("job %v %+v", err, job)
	}
	for job.State == api.JobRunning {
		time.Sleep(50 * time.Millisecond)
		if err := c.Call(ctx, "GET", "/v1/jobs/"+job.ID, nil, &job); err != nil {
			t.Fatal(err)
		}
	}
	if job.State != api.JobDone || job.Done != 2 || job.Report == nil || job.Report.Summaries[0].ResolvedInstances != 2 || job.Report.Results[0].Runs != 2 {
		t.Fatalf("job %+v", job)
	}
	for _, id := range ids {
		if _, err := os.Stat(filepath.Join(job.OutDir, "gold", id, "report.json")); err != nil {
			t.Errorf("harness file: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(job.OutDir, "gold.gold.json")); err != nil {
		t.Errorf("summary: %v", err)
	}
}

// TestServerConcurrent: many sandboxes, each with many execs in flight at
// once, and no output lost or mixed up.
func TestServerConcurrent(t *testing.T) {
	d := startDaemon(t, nil, nil)
	ctx := context.Background()
	const sandboxes, execs = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, sandboxes*execs)
	for i := 0; i < sandboxes; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// 256 MiB: rootless, the memory limit is RLIMIT_AS, set by
			// a Go wrapper before it execs each command; many commands
			// starting at once under it is what this load is for too.
			info, err := d.unix.CreateSandbox(ctx, api.CreateSandboxRequest{Limits: api.Limits{MemoryBytes: 256 << 20}})
			if err != nil {
				errs <- err
				return
			}
			defer d.unix.DeleteSandbox(ctx, info.ID)
			var inner sync.WaitGroup
			for j := 0; j < execs; j++ {
				inner.Add(1)
				go func() {
					defer inner.Done()
					want := info.ID + "-" + string(rune('a'+j%26)) + strings.Repeat("z", j*100)
					res, err := d.unix.Exec(ctx, info.ID, api.ExecRequest{Command: "printf %s " + want})
					if err != nil {
						errs <- err
					} else if res.Stdout != want {
						errs <- &client.Error{Info: api.ErrorInfo{Message: "mixed output: " + res.Stdout[:min(40, len(res.Stdout))]}}
					}
				}()
			}
			inner.Wait()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestServerSwerexProtocol: the SWE-ReX routes answer as swerex-remote
// does where its client and SWE-agent look: auth failures, pydantic's 422
// bodies, 404 and 405 bodies, X-Request-ID replay, 511 exceptions.
func TestServerSwerexProtocol(t *testing.T) {
	d := startDaemon(t, nil, nil)
	info, err := d.unix.CreateSandbox(context.Background(), api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	base := d.tcp + "/swerex/" + info.ID
	hc := &http.Client{}
	send := func(method, path, key, reqID, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("X-API-Key", key)
		}
		if reqID != "" {
			req.Header.Set("X-Request-ID", reqID)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	for _, tc := range []struct {
		method, path, key, body string
		status                  int
		want                    string
	}{
		{"GET", "/is_alive", "", "", 401, `{"detail":"Not authenticated"}`},
		{"GET", "/is_alive", "nope", "", 401, `{"detail":"Invalid API Key"}`},
		{"GET", "/", testToken, "", 200, `{"message":"hello world"}`},
		{"GET", "/is_alive", testToken, "", 200, `{"is_alive":true,"message":""}`},
		{"GET", "/execute", testToken, "", 405, `{"detail":"Method Not Allowed"}`},
		{"GET", "/nowhere", testToken, "", 404, `{"detail":"Not Found"}`},
		{"POST", "/execute", testToken, `{"x":1}`, 422, `{"detail":[{"input":{"x":1},"loc":["body","command"],"msg":"Field required","type":"missing"}]}`},
		{"POST", "/execute", testToken, `nope`, 422, `{"detail":[{"ctx":{"error":"Expecting value"},"input":{},"loc":["body",0],"msg":"JSON decode error","type":"json_invalid"}]}`},
		{"POST", "/run_in_session", testToken, `{"command":"x"}`, 422, `{"detail":[{"ctx":{"discriminator":"'action_type'"},"input":{"command":"x"},"loc":["body"],"msg":"Unable to extract tag using discriminator 'action_type'","type":"union_tag_not_found"}]}`},
		{"POST", "/run_in_session", testToken, `{"action_type":"bash","command":1,"check":"loud"}`, 422, `{"detail":[{"input":1,"loc":["body","bash","command"],"msg":"Input should be a valid string","type":"string_type"},{"ctx":{"expected":"'silent', 'raise' or 'ignore'"},"input":"loud","loc":["body","bash","check"],"msg":"Input should be 'silent', 'raise' or 'ignore'","type":"literal_error"}]}`},
		{"POST", "/run_in_session", testToken, `{"action_type":"bash","command":"true"}`, 511, `{"swerexception":{"class_path":"swerex.exceptions.SessionDoesNotExistError","extra_info":{},"message":"session 'default' does not exist","traceback":""}}`},
		{"POST", "/execute", testToken, `{"command":"exit 3","shell":true,"check":true}`, 511, `{"swerexception":{"class_path":"swerex.exceptions.NonZeroExitCodeError","extra_info":{},"message":"Command 'exit 3' failed with exit code 3. Stdout:\n''\nStderr:\n''","traceback":""}}`},
	} {
		if st, b := send(tc.method, tc.path, tc.key, "", tc.body); st != tc.status || b != tc.want {
			t.Errorf("%s %s %s: %d %s\nwant %d %s", tc.method, tc.path, tc.body, st, b, tc.status, tc.want)
		}
	}
	// A repeated X-Request-ID gets the first answer again, not a rerun.
	cmd := `{"command":"head -c 8 /dev/urandom | od -An -tx1","shell":true}`
	_, first := send("POST", "/execute", testToken, "req-1", cmd)
	_, again := send("POST", "/execute", testToken, "req-1", cmd)
	_, other := send("POST", "/execute", testToken, "req-2", cmd)
	if first != again || first == other {
		t.Fatalf("replay: %s / %s / %s", first, again, other)
	}

	// Interactive commands, answered as SWE-ReX answers them.
	obs := func(out, expect string) string {
		return `{"exit_code":0,"expect_string":"` + expect + `","failure_reason":"","output":"` + out + `","session_type":"bash"}`
	}
	const ps1, prompt = "SHELLPS1PREFIX", `\u003e\u003e\u003e ` // ">>> " as encoding/json writes it
	for _, step := range []struct{ body, want string }{
		{`{"action_type":"bash","command":"cd /tmp; V=7","check":"silent"}`, ""},
		{`{"action_type":"bash","command":"python3 -q","is_interactive_command":true,"expect":[">>> "],"timeout":20}`, obs("", prompt)},
		{`{"action_type":"bash","command":"print(6*7)","is_interactive_command":true,"expect":[">>> "],"timeout":10}`, obs("42", prompt)},
		{`{"action_type":"bash","command":"print('SHELLPS1PREFIX')","is_interactive_command":true,"expect":["[*]"],"timeout":0.3}`,
			`{"swerexception":{"class_path":"swerex.exceptions.CommandTimeoutError","extra_info":{},"message":"timeout after 0.3 seconds while running command \"print('SHELLPS1PREFIX')\"","traceback":""}}`},
		{`{"action_type":"bash","command":"1+","is_interactive_command":true,"expect":["SyntaxError.*\\n>>> "],"timeout":10}`, ""},
		{`{"action_type":"bash","command":"true","check":"silent"}`,
			`{"swerexception":{"class_path":"swerex.exceptions.SwerexException","extra_info":{},"message":"an interactive command runs in session 'default': send it input with is_interactive_command, quit it with is_interactive_quit, or interrupt it","traceback":""}}`},
		{`{"action_type":"bash_interrupt","expect":[">>> "]}`, obs("KeyboardInterrupt", prompt)},
		{`{"action_type":"bash","command":"exit()","is_interactive_quit":true,"timeout":10}`, obs("", ps1)},
		{`{"action_type":"bash","command":"echo $PWD $V","check":"silent"}`, `{"exit_code":0,"expect_string":"` + ps1 + `","failure_reason":"","output":"/tmp 7\n","session_type":"bash"}`},
	} {
		if strings.Contains(step.body, `"cd /tmp`) {
			if st, b := send("POST", "/create_session", testToken, "", `{"session_type":"bash"}`); st != 200 {
				t.Fatalf("create_session: %d %s", st, b)
			}
		}
		st, b := send("POST", "/run_in_session", testToken, "", step.body)
		if step.want != "" && b != step.want || step.want == "" && st != 200 {
			t.Errorf("%s: %d %s\nwant %s", step.body, st, b, step.want)
		}
	}
}
