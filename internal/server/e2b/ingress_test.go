package e2b

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/server/ingress"
)

// TestE2BIngress: the SDK's sandbox URLs (get_host) reach servers in the
// sandbox through the daemon: python3 -m http.server's file, the Host and
// path a server sees, a WebSocket upgrade echoing; a port nothing listens
// on, a killed sandbox and a paused one without auto_resume answer 502 as
// E2B's edge does; allow_public_traffic false wants the traffic access
// token (403 without it or with another, which the server never sees), and
// a fork of such a sandbox its own; a request to a paused auto_resume
// sandbox resumes it. network.mask_request_host sets the Host the server
// sees (${PORT}: the port), its fork's too, X-Forwarded-Host keeping the
// URL's.
func TestE2BIngress(t *testing.T) {
	out := sdkScript(t, "sdk_ingress.py")
	var got struct {
		Host          string         `json:"host"`
		ID            string         `json:"sandbox_id"`
		Served        []any          `json:"served"`
		Seen          map[string]any `json:"seen"`
		Websocket     []string       `json:"websocket"`
		Refused       []any          `json:"refused"`
		Killed        []any          `json:"killed"`
		Private       []any          `json:"private"`
		ForkedPrivate []any          `json:"forked_private"`
		AutoBefore    string         `json:"auto_before"`
		AutoRequest   []any          `json:"auto_request"`
		AutoAfter     []string       `json:"auto_after"`
		PausedRequest []any          `json:"paused_request"`
		PausedAfter   string         `json:"paused_after"`
		Masked        []any          `json:"masked"`
		MaskedFork    string         `json:"masked_fork"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	if port, id, ok := ingress.ParseHost(got.Host); !ok || port != 8000 || id != got.ID {
		t.Fatalf("get_host(8000) gave %q, which names port %d of %q; want port 8000 of %s", got.Host, port, id, got.ID)
	}
	if fmt.Sprint(got.Served) != "[200 hello from the sandbox]" {
		t.Errorf("GET /hello.txt of http.server on port 8000: %v", got.Served)
	}
	if got.Seen["host"] != strings.Replace(got.Host, "8000-", "8002-", 1) || got.Seen["path"] != "/a/b?c=d" {
		t.Errorf("the server on port 8002 saw %v; want the sandbox URL's Host and /a/b?c=d", got.Seen)
	}
	if fmt.Sprint(got.Websocket) != "[HTTP/1.1 101 Switching Protocols ping over the upgrade]" {
		t.Errorf("a WebSocket upgrade to port 8002: %v, want 101 and the message echoed", got.Websocket)
	}
	const wantPortClosed = "no service running on port 8001"
	if len(got.Refused) != 2 || got.Refused[0] != float64(502) || !strings.Contains(fmt.Sprint(got.Refused[1]), wantPortClosed) {
		t.Errorf("port 8001, where nothing listens: %v, want 502 saying %q", got.Refused, wantPortClosed)
	}
	if len(got.Killed) != 2 || got.Killed[0] != float64(502) || !strings.Contains(fmt.Sprint(got.Killed[1]), "was not found") {
		t.Errorf("a killed sandbox's URL: %v, want 502 not found", got.Killed)
	}
	if len(got.Private) != 5 || got.Private[0] != true || fmt.Sprint(got.Private[3:]) != "[200 <nil>]" ||
		!strings.HasPrefix(fmt.Sprint(got.Private[1]), "[403 ") || !strings.Contains(fmt.Sprint(got.Private[1]), "is missing") ||
		!strings.HasPrefix(fmt.Sprint(got.Private[2]), "[403 ") || !strings.Contains(fmt.Sprint(got.Private[2]), "is invalid") {
		t.Errorf("allow_public_traffic false: [a token of its own, without it, with another, with it, the token the server saw] = %v; "+
			"want [true, 403 missing, 403 invalid, 200, none]", got.Private)
	}
	if fmt.Sprint(got.ForkedPrivate) != "[true 403]" {
		t.Errorf("a fork of that sandbox: [a token of its own, a request without it] = %v, want [true 403]", got.ForkedPrivate)
	}
	if got.AutoBefore != "paused" || fmt.Sprint(got.AutoAfter) != "[running kept]" {
		t.Errorf("auto_resume: state %q before the request, [state, file] %v after; want paused, then [running kept]", got.AutoBefore, got.AutoAfter)
	}
	if len(got.AutoRequest) != 2 || got.AutoRequest[0] != float64(502) || !strings.Contains(fmt.Sprint(got.AutoRequest[1]), "port 8000") {
		t.Errorf("the request that resumed the sandbox: %v, want 502 for port 8000 (a pause keeps files, not processes)", got.AutoRequest)
	}
	if fmt.Sprint(got.Masked) != "[custom-host.example.com:8002 true]" || got.MaskedFork != "custom-host.example.com:8002" {
		t.Errorf("mask_request_host custom-host.example.com:${PORT}: [Host, X-Forwarded-Host is the URL's] = %v, the fork's Host %q; "+
			"want [custom-host.example.com:8002 true] and the same Host", got.Masked, got.MaskedFork)
	}
	if len(got.PausedRequest) != 2 || got.PausedRequest[0] != float64(502) || got.PausedAfter != "paused" {
		t.Errorf("a paused sandbox without auto_resume: %v and state %q after; want 502 and still paused", got.PausedRequest, got.PausedAfter)
	}
}

func TestParseHost(t *testing.T) {
	for _, tc := range []struct {
		host string
		port int
		id   string
		ok   bool
	}{
		{"8000-abc123.e2b.app", 8000, "abc123", true},
		{"8000-abc123.msb.localhost:3000", 8000, "abc123", true},
		{"49983-i-x.example.com", 49983, "i-x", true},
		{"127.0.0.1:3000", 0, "", false},
		{"api.e2b.app", 0, "", false},
		{"localhost:3000", 0, "", false},
		{"0080-abc.e2b.app", 0, "", false},
		{"70000-abc.e2b.app", 0, "", false},
		{"8000-.e2b.app", 0, "", false},
		{"8000-abc", 0, "", false},
	} {
		port, id, ok := ingress.ParseHost(tc.host)
		if port != tc.port || id != tc.id || ok != tc.ok {
			t.Errorf("ParseHost(%q) = %d %q %v, want %d %q %v", tc.host, port, id, ok, tc.port, tc.id, tc.ok)
		}
	}
}

// TestE2BIngressPort: a sandbox URL's request reaches a server in a
// sandbox created through the REST API, and a port nothing listens on is
// 502, in either mode without the SDK; a maskRequestHost that is no host
// name is a 400 at create. TestE2BIngressRootless reruns it rootless.
func TestE2BIngressPort(t *testing.T) {
	url, e := startFrontEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bad := restRequest(t, "POST", url+"/sandboxes", `{"timeout": 120, "network": {"maskRequestHost": "a host/${PORT}"}}`)
	if err := doJSON(bad, nil); err == nil || !strings.Contains(err.Error(), ": 400 ") || !strings.Contains(err.Error(), "maskRequestHost") {
		t.Errorf("a create with maskRequestHost %q: %v, want 400 naming it", "a host/${PORT}", err)
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/sandboxes", strings.NewReader(`{"timeout": 120}`))
	req.Header.Set("X-API-Key", testKey)
	var created struct {
		ID string `json:"sandboxID"`
	}
	if err := doJSON(req, &created); err != nil {
		t.Fatalf("creating a sandbox: %v", err)
	}
	sb, err := e.Sandbox(created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.OpenSession(ctx, api.SessionRequest{Name: "server"}); err != nil {
		t.Fatal(err)
	}
	start := `mkdir -p /tmp/www && echo served > /tmp/www/index.txt && (cd /tmp/www && python3 -m http.server 8000 >/dev/null 2>&1 &)
for i in $(seq 300); do (echo > /dev/tcp/127.0.0.1/8000) 2>/dev/null && break; sleep 0.1; done`
	if res, err := sb.Exec(ctx, api.ExecRequest{Command: start, Session: "server"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("starting http.server: %+v %v", res, err)
	}
	for _, tc := range []struct {
		port   int
		status int
		body   string
	}{
		{8000, 200, "served\n"},
		{8001, 502, "no service running on port 8001"},
	} {
		req, _ := http.NewRequestWithContext(ctx, "GET", url+"/index.txt", nil)
		req.Host = fmt.Sprintf("%d-%s.msb.test", tc.port, created.ID)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.body) {
			t.Errorf("GET /index.txt with Host %s: %d %q, want %d and %q", req.Host, resp.StatusCode, body, tc.status, tc.body)
		}
	}
}

// doJSON sends req and decodes a 2xx answer's JSON into v.
func doJSON(req *http.Request, v any) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, body)
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(body, v)
}

// TestE2BIngressRootless reruns TestE2BIngressPort,
// TestE2BIngressAfterRestart and TestE2BIngressShutdown as an unprivileged user: the rootless daemon
// reaches the sandbox's ports through its supervisor too.
func TestE2BIngressRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestE2BIngress(Port|AfterRestart|Shutdown)$")
}

// TestE2BIngressAfterRestart: a sandbox with private URLs, paused, keeps
// its traffic access token in its record: after a restart, connect gives
// the same token, and the resumed sandbox's URLs still want it.
func TestE2BIngressAfterRestart(t *testing.T) {
	state, cache := privtest.StateDir(t), filepath.Join(t.TempDir(), "cache")
	d := startDaemon(t, state, cache)
	var sb struct {
		ID      string `json:"sandboxID"`
		Traffic string `json:"trafficAccessToken"`
	}
	if err := doJSON(restRequest(t, "POST", d.url+"/sandboxes", `{"timeout": 120, "network": {"allowPublicTraffic": false}}`), &sb); err != nil {
		t.Fatalf("creating a sandbox: %v", err)
	}
	if sb.Traffic == "" {
		t.Fatal("a create with allowPublicTraffic false answered no trafficAccessToken")
	}
	if err := doJSON(restRequest(t, "POST", d.url+"/sandboxes/"+sb.ID+"/pause", ""), nil); err != nil {
		t.Fatalf("pausing: %v", err)
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, state, cache)
	defer func() {
		if err := d.stop(); err != nil {
			t.Error(err)
		}
	}()
	var again struct {
		Traffic string `json:"trafficAccessToken"`
	}
	if err := doJSON(restRequest(t, "POST", d.url+"/sandboxes/"+sb.ID+"/connect", `{"timeout": 120}`), &again); err != nil {
		t.Fatalf("connecting after the restart: %v", err)
	}
	if again.Traffic != sb.Traffic {
		t.Errorf("connect after the restart gave the traffic token %q, want the create's %q", again.Traffic, sb.Traffic)
	}
	for _, tc := range []struct {
		token  string
		status int
	}{{"", 403}, {sb.Traffic, 502}} { // 502: the token passes, nothing listens on 8000
		req, _ := http.NewRequest("GET", d.url+"/", nil)
		req.Host = "8000-" + sb.ID + ".msb.test"
		if tc.token != "" {
			req.Header.Set("e2b-traffic-access-token", tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("a request to port 8000 after the restart with token %q: %d, want %d", tc.token, resp.StatusCode, tc.status)
		}
	}
	if err := doJSON(restRequest(t, "DELETE", d.url+"/sandboxes/"+sb.ID, ""), nil); err != nil {
		t.Fatalf("killing: %v", err)
	}
}

// restRequest is a control-plane request with the API key.
func restRequest(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", testKey)
	req.Header.Set("Content-Type", "application/json")
	return req
}

// wsEcho is a WebSocket server on port 8000 in a sandbox: 101 to an
// upgrade, then it echoes what comes.
const wsEcho = `cat > /tmp/ws.py <<'PY'
import socket, threading
def handle(c):
    f = c.makefile("rb")
    while f.readline() not in (b"\r\n", b"\n", b""):
        pass
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
    while True:
        b = c.recv(4096)
        if not b:
            break
        c.sendall(b)
    c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8000))
s.listen()
while True:
    threading.Thread(target=handle, args=(s.accept()[0],), daemon=True).start()
PY
(python3 /tmp/ws.py >/dev/null 2>&1 &)
for i in $(seq 300); do (echo > /dev/tcp/127.0.0.1/8000) 2>/dev/null && break; sleep 0.1; done`

// TestE2BIngressShutdown: a WebSocket open to a sandbox's URL does not
// hold up a shutdown's pause: the daemon closes it (its client reads the
// end) and pauses the sandbox, where waiting for it as for a request in
// flight would spend the pause's time and leave the sandbox unpaused.
func TestE2BIngressShutdown(t *testing.T) {
	state, cache := privtest.StateDir(t), filepath.Join(t.TempDir(), "cache")
	d := startDaemonPausing(t, state, cache, 2*time.Minute) // a bound on a stuck pause, not a speed
	stopped := false
	defer func() {
		if !stopped {
			d.stop()
		}
	}()
	var created struct {
		ID string `json:"sandboxID"`
	}
	if err := doJSON(restRequest(t, "POST", d.url+"/sandboxes", `{"timeout": 300}`), &created); err != nil {
		t.Fatalf("creating a sandbox: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := d.e.Sandbox(created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.OpenSession(ctx, api.SessionRequest{Name: "server"}); err != nil {
		t.Fatal(err)
	}
	if res, err := sb.Exec(ctx, api.ExecRequest{Command: wsEcho, Session: "server"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("starting the WebSocket server: %+v %v", res, err)
	}
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(d.url, "http://"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: 8000-%s.msb.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", created.ID)
	br := bufio.NewReader(c)
	status, _ := br.ReadString('\n')
	for l := ""; err == nil && l != "\r\n"; l, err = br.ReadString('\n') {
	}
	io.WriteString(c, "ping")
	echo := make([]byte, 4)
	n, _ := io.ReadFull(br, echo)
	if strings.TrimSpace(status) != "HTTP/1.1 101 Switching Protocols" || string(echo[:n]) != "ping" {
		t.Fatalf("the WebSocket through the sandbox URL: %q, echo %q; want 101 and ping", status, echo[:n])
	}

	done := make(chan error, 1)
	go func() { done <- d.stop() }()
	stopped = true
	c.SetDeadline(time.Now().Add(time.Minute)) // a bound: the pause's time is 2 minutes
	if b, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("reading the WebSocket after the stop began: %q %v, want the daemon to close it (EOF)", b, err)
	}
	if err := <-done; err != nil {
		t.Errorf("the stop with a WebSocket open: %v, want the sandbox paused", err)
	}
	if _, err := readRecord((&records{dir: stateDir(cache)}).path(kindPaused, created.ID), kindPaused, created.ID); err != nil {
		t.Errorf("the paused record of the sandbox after the stop: %v", err)
	}
}
