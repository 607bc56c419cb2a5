package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/client"
	"github.com/minisandbox/msb/internal/harness"
)

// TestServerBadInput sends requests a client gets wrong: each is answered
// with a 4xx whose message names the field, never a 500, and nothing is
// started for it.
func TestServerBadInput(t *testing.T) {
	d := startDaemon(t, nil, nil)
	c := &http.Client{Timeout: time.Minute} // a daemon stuck on a request fails the test, not the suite's timeout
	inst := generated(t).Instances[0].InstanceID
	dir := t.TempDir()
	unreadable := filepath.Join(dir, "unreadable.json")
	if err := os.WriteFile(unreadable, []byte("[]"), 0); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, method, path, body string
		status                   int
		names                    string // what the message must name
	}{
		{"huge pids", "POST", "/v1/sandboxes", `{"limits":{"pids":4611686018427387904}}`, 400, "limits.pids"},
		{"few pids", "POST", "/v1/sandboxes", `{"limits":{"pids":3}}`, 400, "limits.pids"},
		{"huge cpus", "POST", "/v1/sandboxes", `{"limits":{"cpus":1e300}}`, 400, "limits.cpus"},
		{"negative max_output", "POST", "/v1/sandboxes", `{"max_output":-1}`, 400, "max_output"},
		{"huge gym pids", "POST", "/v1/gym/reset", `{"instance_id":"` + inst + `","limits":{"pids":4611686018427387904}}`, 400, "limits.pids"},
		{"dataset dir", "POST", "/v1/datasets", `{"path":"` + dir + `"}`, 400, "path"},
		{"dataset fifo", "POST", "/v1/datasets", `{"path":"` + fifo + `"}`, 400, "path"},
		{"job model ..", "POST", "/v1/jobs", `{"run_id":"r1","predictions":[{"instance_id":"` + inst + `","model_name_or_path":"..","model_patch":""}]}`, 400, "predictions[0].model_name_or_path"},
		{"job twice", "POST", "/v1/jobs", `{"run_id":"r1","predictions":[{"instance_id":"` + inst + `","model_name_or_path":"m","model_patch":""},{"instance_id":"` + inst + `","model_name_or_path":"m","model_patch":""}]}`, 400, "predictions[1].instance_id"},
	}
	if os.Geteuid() != 0 {
		cases = append(cases, struct {
			name, method, path, body string
			status                   int
			names                    string
		}{"dataset unreadable", "POST", "/v1/datasets", `{"path":"` + unreadable + `"}`, 400, "path"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, b := raw(t, c, tc.method, d.tcp+tc.path, testToken, tc.body)
			if status != tc.status || !strings.Contains(string(b), tc.names) {
				t.Fatalf("%s %s %s: %d %s; want %d naming %s", tc.method, tc.path, tc.body, status, b, tc.status, tc.names)
			}
		})
	}
	if n := len(d.e.Sandboxes(nil)); n != 0 {
		t.Errorf("%d sandboxes left", n)
	}
	jobs, _ := d.s.listJobs(nil, nil)
	if n := len(jobs.(api.JobList).Jobs); n != 0 {
		t.Errorf("%d jobs started for bad requests", n)
	}
}

// rawConn opens a connection to the daemon's TCP listener.
func rawConn(t *testing.T, d *daemon) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(d.tcp, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// announce sends a request's headers announcing a body of n bytes, and
// what of the body is given.
func announce(t *testing.T, conn net.Conn, path string, n int, body string) {
	t.Helper()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, testToken, n, body)
}

// readStatus reads an answer; a minute without one fails the test.
func readStatus(t *testing.T, conn net.Conn) (int, string) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	defer conn.SetReadDeadline(time.Time{})
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServerTruncatedBody: a body cut short by the client (its write side
// closed) is a 400 saying so.
func TestServerTruncatedBody(t *testing.T) {
	d := startDaemon(t, nil, nil)
	conn := rawConn(t, d)
	announce(t, conn, "/v1/sandboxes", 100, `{"limits":`)
	conn.(*net.TCPConn).CloseWrite()
	status, body := readStatus(t, conn)
	if status != http.StatusBadRequest || !strings.Contains(body, "cut short") {
		t.Fatalf("truncated body: %d %s", status, body)
	}
}

// TestServerStalledBody: a body announced and not sent is a 408 once the
// body's idle timeout passes, on every route that reads a body.
func TestServerStalledBody(t *testing.T) {
	d := startDaemon(t, nil, func(o *Options) { o.BodyIdleTimeout = 200 * time.Millisecond })
	for _, path := range []string{"/v1/sandboxes", "/v1/jobs", "/v1/sandboxes/x/files?path=/a", "/swerex/x/execute"} {
		conn := rawConn(t, d)
		method := "POST"
		if strings.Contains(path, "files") {
			method = "PUT"
		}
		fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nX-API-Key: %s\r\nContent-Length: 50\r\n\r\n{", method, path, testToken, testToken)
		status, body := readStatus(t, conn)
		if status != http.StatusRequestTimeout && !(strings.HasPrefix(path, "/swerex") && status >= 400 && status < 500) {
			t.Errorf("%s: %d %s", path, status, body)
		}
	}
}

// TestServerShutdownStalled: a shutdown does not wait for clients that
// stopped mid-request (headers or body): Serve returns well within its
// grace, and a request running at the time still gets its answer.
func TestServerShutdownStalled(t *testing.T) {
	d := startDaemon(t, nil, nil)
	s := New(d.e, Options{Token: testToken, ShutdownGrace: time.Hour, HeaderTimeout: time.Hour, BodyIdleTimeout: time.Hour})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	body := dial()
	announce(t, body, "/v1/sandboxes", 100, "{")
	headers := dial()
	fmt.Fprintf(headers, "GET /v1/health HTTP/1.1\r\nHost: x\r\n")
	running := dial()
	fmt.Fprintf(running, "POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 2\r\n\r\n{}", testToken)
	// The running request has its sandbox: it is past its body.
	for len(d.e.Sandboxes(nil)) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	// The grace and timeouts are an hour: Serve returning at all shows
	// it waited for none of the stalled clients.
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Serve still waits a minute after shutdown began: it waits for the stalled clients")
	}
	status, b := readStatus(t, running)
	if status != http.StatusCreated {
		t.Fatalf("the request running at shutdown: %d %s", status, b)
	}
	var info api.SandboxInfo
	json.Unmarshal([]byte(b), &info)
	if _, err := d.e.CloseSandbox(info.ID); err != nil {
		t.Error(err)
	}
}

// TestServerMaxConns: past MaxConns open connections a new one is not
// served until one closes.
func TestServerMaxConns(t *testing.T) {
	d := startDaemon(t, nil, nil)
	s := New(d.e, Options{Token: testToken, MaxConns: 2})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	defer func() { cancel(); <-done }()
	var held []net.Conn
	for range 2 {
		conn, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", testToken)
		if status, _ := readStatus(t, conn); status != 200 {
			t.Fatalf("health: %d", status)
		}
		held = append(held, conn)
	}
	third, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	fmt.Fprintf(third, "GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", testToken)
	// Not answered while both slots are held (looked at for a while: a
	// slow machine can only make this pass, never fail wrongly).
	third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := third.Read(make([]byte, 1)); n != 0 || !os.IsTimeout(err) {
		t.Fatalf("a third connection was served past MaxConns 2: %d %v", n, err)
	}
	third.SetReadDeadline(time.Time{})
	held[0].Close()
	if status, _ := readStatus(t, third); status != 200 {
		t.Fatalf("health once a slot freed: %d", status)
	}
}

// TestServerJobRunBusy: a job over an instance its run id is evaluating
// (in another job of the daemon, or an msb eval holding it) is refused
// with a 409 naming the run id, and nothing is started for it; a job of
// the same run id over other instances (msb.ray's one-instance jobs) is
// accepted, and so is the same job once the run is free.
func TestServerJobRunBusy(t *testing.T) {
	d := startDaemon(t, nil, nil)
	ctx := context.Background()
	inst := generated(t).Instances[0].InstanceID
	req := api.JobRequest{RunID: "busy", InstanceIDs: []string{inst}, Gold: true, Workers: 1}

	// Held as an msb eval of the same output directory holds it.
	unlock, err := harness.New(filepath.Join(d.dir, "out")).LockRun("busy", []string{inst})
	if err != nil {
		t.Fatal(err)
	}
	var job api.Job
	err = d.unix.Call(ctx, "POST", "/v1/jobs", req, &job)
	if !client.IsCode(err, api.CodeConflict) || !strings.Contains(err.Error(), `"busy"`) {
		t.Fatalf("a job of a run held elsewhere: %v", err)
	}
	var other api.Job
	otherReq := api.JobRequest{RunID: "busy", InstanceIDs: []string{generated(t).Instances[1].InstanceID}, Gold: true, Workers: 1}
	if err := d.unix.Call(ctx, "POST", "/v1/jobs", otherReq, &other); err != nil {
		t.Fatalf("a job of the run over another instance: %v", err)
	}
	unlock()

	// Two jobs of the daemon.
	var first, second api.Job
	if err := d.unix.Call(ctx, "POST", "/v1/jobs", req, &first); err != nil {
		t.Fatal(err)
	}
	err = d.unix.Call(ctx, "POST", "/v1/jobs", req, &second)
	if err == nil {
		// Accepted only if the first had ended by then.
		var f api.Job
		if err := d.unix.Call(ctx, "GET", "/v1/jobs/"+first.ID, nil, &f); err != nil {
			t.Fatal(err)
		}
		ended, _ := time.Parse(time.RFC3339Nano, f.FinishedAt)
		created, _ := time.Parse(time.RFC3339Nano, second.CreatedAt)
		if f.State == api.JobRunning || ended.After(created) {
			t.Fatalf("a second job of a running run id was accepted: first %+v, second %+v", f, second)
		}
	} else if !client.IsCode(err, api.CodeConflict) || !strings.Contains(err.Error(), `"busy"`) {
		t.Fatalf("a second job of a running run id: %v", err)
	}
	for first.State == api.JobRunning {
		time.Sleep(50 * time.Millisecond)
		if err := d.unix.Call(ctx, "GET", "/v1/jobs/"+first.ID, nil, &first); err != nil {
			t.Fatal(err)
		}
	}
	if first.State != api.JobDone {
		t.Fatalf("first job %+v", first)
	}
	if err := d.unix.Call(ctx, "POST", "/v1/jobs", req, &second); err != nil {
		t.Fatalf("the run id once free: %v", err)
	}
	for _, jb := range []*api.Job{&second, &other} {
		for jb.State == api.JobRunning {
			time.Sleep(50 * time.Millisecond)
			if err := d.unix.Call(ctx, "GET", "/v1/jobs/"+jb.ID, nil, jb); err != nil {
				t.Fatal(err)
			}
		}
		if jb.State != api.JobDone {
			t.Errorf("job %+v", *jb)
		}
	}
}
