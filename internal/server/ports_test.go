package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
)

// echoHTTP is an HTTP server on port 8000 in a sandbox that answers every
// method with what it got (method, path with query, body, the daemon's
// token headers) as JSON, after N seconds for a path /sleep/N, and a
// WebSocket upgrade with 101, then echoes.
const echoHTTP = `cat > /tmp/echo.py <<'PY'
import json, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def handle_any(self):
        if self.headers.get("Upgrade", "").lower() == "websocket":
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.end_headers()
            self.wfile.flush()
            while True:
                b = self.connection.recv(4096)
                if not b:
                    break
                self.connection.sendall(b)
            self.close_connection = True
            return
        if self.path.startswith("/sleep/"):
            time.sleep(float(self.path[len("/sleep/"):]))
        n = int(self.headers.get("Content-Length") or 0)
        body = json.dumps({"method": self.command, "path": self.path, "body": self.rfile.read(n).decode(),
                           "authorization": self.headers.get("Authorization"), "x_api_key": self.headers.get("X-API-Key")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any
    def log_message(self, *a):
        pass
ThreadingHTTPServer(("127.0.0.1", 8000), H).serve_forever()
PY
(python3 /tmp/echo.py >/dev/null 2>&1 &)
for i in $(seq 300); do (echo > /dev/tcp/127.0.0.1/8000) 2>/dev/null && break; sleep 0.1; done`

// echoSandbox creates a sandbox with req, deleted at the test's end (gone
// already if reaped), and starts echoHTTP in its session "server".
func echoSandbox(ctx context.Context, t *testing.T, d *daemon, req api.CreateSandboxRequest) api.SandboxInfo {
	t.Helper()
	info, err := d.unix.CreateSandbox(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		d.unix.DeleteSandbox(ctx, info.ID)
	})
	if err := d.unix.OpenSession(ctx, info.ID, api.SessionRequest{Name: "server"}); err != nil {
		t.Fatal(err)
	}
	if res, err := d.unix.Exec(ctx, info.ID, api.ExecRequest{Command: echoHTTP, Session: "server"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("starting the server: %+v %v", res, err)
	}
	return info
}

// TestServerPorts: /v1/sandboxes/{id}/ports/{port}/ carries requests to a
// server on the sandbox's loopback (method, path, query and body as sent,
// the daemon's token left out) and a WebSocket upgrade; a port nothing
// listens on is 502, a bad port 400, an unknown sandbox 404.
func TestServerPorts(t *testing.T) {
	d := startDaemon(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	info := echoSandbox(ctx, t, d, api.CreateSandboxRequest{})
	base := d.tcp + "/v1/sandboxes/" + info.ID + "/ports/"
	send := func(method, url, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+d.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, m := range portMethods {
		status, body := send(m, base+"8000/a/b?x=1", "body of "+m)
		var got map[string]any
		json.Unmarshal([]byte(body), &got)
		want := map[string]any{"method": m, "path": "/a/b?x=1", "body": "body of " + m, "authorization": nil, "x_api_key": nil}
		if status != 200 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s through the port: %d %s, want 200 and %v", m, status, body, want)
		}
	}
	if status, body := send("GET", base+"8000/", ""); status != 200 || !strings.Contains(body, `"path": "/"`) {
		t.Errorf("GET of the port's root: %d %s", status, body)
	}
	if got := upgrade(t, d, "/v1/sandboxes/"+info.ID+"/ports/8000/ws"); fmt.Sprint(got) != "[HTTP/1.1 101 Switching Protocols ping]" {
		t.Errorf("a WebSocket upgrade through the port: %v, want 101 and the message echoed", got)
	}
	for _, tc := range []struct {
		url    string
		status int
		code   api.ErrorCode
	}{
		{base + "8001/", 502, api.CodeUnavailable},
		{base + "http/", 400, api.CodeBadRequest},
		{base + "0/", 400, api.CodeBadRequest},
		{d.tcp + "/v1/sandboxes/no-such-sandbox/ports/8000/", 404, api.CodeNotFound},
	} {
		status, body := send("GET", tc.url, "")
		var e api.ErrorBody
		json.Unmarshal([]byte(body), &e)
		if status != tc.status || e.Error.Code != tc.code {
			t.Errorf("GET %s: %d %s, want %d %s", tc.url, status, body, tc.status, tc.code)
		}
	}
}

// upgrade asks the daemon for a WebSocket upgrade at path, sends "ping"
// and reads it back: [status line, echo].
func upgrade(t *testing.T, d *daemon, path string) []string {
	t.Helper()
	ws, status := openUpgrade(t, d, path)
	defer ws.Close()
	return []string{status, ws.echo("ping")}
}

// wsConn is an upgraded connection through the daemon.
type wsConn struct {
	net.Conn
	br *bufio.Reader
}

// openUpgrade asks the daemon for a WebSocket upgrade at path and reads
// the answer's header; status is its status line.
func openUpgrade(t *testing.T, d *daemon, path string) (ws *wsConn, status string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(d.tcp, "http://"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: msb\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", path, d.token)
	br := bufio.NewReader(c)
	status, _ = br.ReadString('\n')
	for {
		l, err := br.ReadString('\n')
		if err != nil || l == "\r\n" {
			break
		}
	}
	return &wsConn{Conn: c, br: br}, strings.TrimSpace(status)
}

// echo sends msg and reads as many bytes back (fewer if the connection
// ends), within a minute.
func (ws *wsConn) echo(msg string) string {
	ws.SetDeadline(time.Now().Add(time.Minute))
	io.WriteString(ws, msg)
	b := make([]byte, len(msg))
	n, _ := io.ReadFull(ws.br, b)
	return string(b[:n])
}

// TestServerPortsIdle: traffic through a sandbox's port is activity for
// its idle timeout (3 s here), as exec calls are: a request its server
// answers after twice that keeps the sandbox running, and so does a
// WebSocket's traffic for twice that; once the traffic stops, the sandbox
// is reaped as idle. TestRootless reruns it.
func TestServerPortsIdle(t *testing.T) {
	const idle = 3 * time.Second
	d := startDaemon(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	info := echoSandbox(ctx, t, d, api.CreateSandboxRequest{IdleTimeoutNs: int64(idle)})
	state := func() string {
		got, err := d.unix.Sandbox(ctx, info.ID)
		if err != nil {
			t.Fatal(err)
		}
		return string(got.State) + " " + got.Reason
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/v1/sandboxes/%s/ports/8000/sleep/%d", d.tcp, info.ID, 2*idle/time.Second), nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || state() != "running " {
		t.Fatalf("a request answered after twice the idle timeout: %d %s, and the sandbox is %q; want 200 and running", resp.StatusCode, body, state())
	}
	ws, status := openUpgrade(t, d, "/v1/sandboxes/"+info.ID+"/ports/8000/ws")
	defer ws.Close()
	if status != "HTTP/1.1 101 Switching Protocols" {
		t.Fatalf("the WebSocket upgrade: %q", status)
	}
	for start := time.Now(); time.Since(start) < 2*idle; time.Sleep(idle / 10) {
		if got := ws.echo("ping"); got != "ping" {
			t.Fatalf("a WebSocket message after %s: echo %q, and the sandbox is %q; want ping and running", time.Since(start).Round(time.Millisecond), got, state())
		}
	}
	if got := state(); got != "running " {
		t.Fatalf("after twice the idle timeout of WebSocket messages the sandbox is %q, want running", got)
	}
	ws.Close()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		got := state()
		if got == string(api.SandboxReaped)+" "+api.ReapIdle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after its traffic stopped the sandbox is %q, want reaped idle_timeout", got)
		}
	}
}

// TestServerPortsShutdown: a daemon that stops closes the WebSockets open
// through its port route (its client reads the end) rather than leaving
// them to run on past its shutdown, which neither waits for nor closes
// hijacked connections. A second server on the test daemon's engine is
// the one stopped. TestRootless reruns it.
func TestServerPortsShutdown(t *testing.T) {
	d := startDaemon(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	info := echoSandbox(ctx, t, d, api.CreateSandboxRequest{})
	l, err := Listen("127.0.0.1:0", -1)
	if err != nil {
		t.Fatal(err)
	}
	second := &daemon{tcp: "http://" + l.Addr().String(), token: d.token}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- New(d.e, Options{Token: d.token, ShutdownGrace: 5 * time.Second}).Serve(sctx, l) }()
	defer stop()
	ws, status := openUpgrade(t, second, "/v1/sandboxes/"+info.ID+"/ports/8000/ws")
	defer ws.Close()
	if got := ws.echo("ping"); status != "HTTP/1.1 101 Switching Protocols" || got != "ping" {
		t.Fatalf("the WebSocket through the second server: %q, echo %q", status, got)
	}
	stop()
	if err := <-served; err != nil {
		t.Errorf("the second server's Serve: %v", err)
	}
	ws.SetDeadline(time.Now().Add(time.Minute)) // a bound, not a speed
	if b, err := ws.br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("reading the WebSocket after its server stopped: %q %v, want the server to have closed it (EOF)", b, err)
	}
}
