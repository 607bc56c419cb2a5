package server

import (
	"bufio"
	"context"
	"encoding/json"
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
// token headers) as JSON, and a WebSocket upgrade with 101, then echoes.
const echoHTTP = `cat > /tmp/echo.py <<'PY'
import json
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

// TestServerPorts: /v1/sandboxes/{id}/ports/{port}/ carries requests to a
// server on the sandbox's loopback (method, path, query and body as sent,
// the daemon's token left out) and a WebSocket upgrade; a port nothing
// listens on is 502, a bad port 400, an unknown sandbox 404.
func TestServerPorts(t *testing.T) {
	d := startDaemon(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	info, err := d.unix.CreateSandbox(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.unix.DeleteSandbox(ctx, info.ID)
	if err := d.unix.OpenSession(ctx, info.ID, api.SessionRequest{Name: "server"}); err != nil {
		t.Fatal(err)
	}
	if res, err := d.unix.Exec(ctx, info.ID, api.ExecRequest{Command: echoHTTP, Session: "server"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("starting the server: %+v %v", res, err)
	}
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
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(d.tcp, "http://"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: msb\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", path, d.token)
	br := bufio.NewReader(c)
	status, _ := br.ReadString('\n')
	for {
		l, err := br.ReadString('\n')
		if err != nil || l == "\r\n" {
			break
		}
	}
	io.WriteString(c, "ping")
	echo := make([]byte, 4)
	n, _ := io.ReadFull(br, echo)
	return []string{strings.TrimSpace(status), string(echo[:n])}
}
