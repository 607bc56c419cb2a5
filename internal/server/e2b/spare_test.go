package e2b

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process"
)

// createWith creates a sandbox with that JSON body and returns its id.
func createWith(t *testing.T, url, body string) string {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/v2/sandboxes", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", testKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var created struct {
		SandboxID string `json:"sandboxID"`
	}
	if res.StatusCode != http.StatusCreated || json.Unmarshal(b, &created) != nil || created.SandboxID == "" {
		t.Fatalf("create %s: %d %s", body, res.StatusCode, b)
	}
	return created.SandboxID
}

// newSandbox waits until e holds a sandbox whose id is not in known, and
// returns it.
func newSandbox(t *testing.T, e *engine.Engine, known ...string) string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		for _, s := range e.Sandboxes(nil) {
			if !slices.Contains(known, s.ID) {
				return s.ID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sandbox besides %v a minute on", known)
		}
	}
}

// serveEngine serves the E2B front end of an engine opened with cfg (its
// state and cache the test's own) until stop, which the test's end also
// calls; the engine is closed after the test.
func serveEngine(t *testing.T, cfg engine.Config) (url string, e *engine.Engine, stop func()) {
	t.Helper()
	cfg.StateDir, cfg.Cache = privtest.StateDir(t), engine.CacheConfig{Dir: filepath.Join(t.TempDir(), "cache")}
	e, err := engine.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(e, testKey, nil).Serve(ctx, l) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return "http://" + l.Addr().String(), e, stop
}

// TestE2BSpare: after a create of the base template the front starts the
// next one ahead, which the next such create gets as it is (a base
// sandbox, its home the working directory); a create of another shape
// (envVars) starts its own; Serve's end closes the spare and leaves the
// clients' sandboxes to the engine.
func TestE2BSpare(t *testing.T) {
	url, e, stop := serveEngine(t, engine.Config{})
	a := createWith(t, url, `{}`)
	spare := newSandbox(t, e, a)
	b := createWith(t, url, `{"templateID": "base", "metadata": {"k": "v"}}`)
	if b != spare {
		t.Fatalf("the second create of the base got sandbox %s, want the spare %s started after the first", b, spare)
	}
	_, got := call(t, "GET", url+"/sandboxes/"+b, map[string]string{"X-API-Key": testKey})
	c := envdClient{url: url, id: b, token: got["envdAccessToken"].(string)}
	cfg := &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", `echo "$HOME $PWD"`}}
	if out, _, code := c.run(t, cfg); out != "/home/user /home/user\n" || code != 0 {
		t.Errorf("in the spare taken: HOME and PWD %q (exit %d), want the base's /home/user", out, code)
	}
	spare = newSandbox(t, e, a, b)
	if d := createWith(t, url, `{"envVars": {"X": "1"}}`); d == spare {
		t.Errorf("a create with envVars got the spare %s, started without them", d)
	}
	stop()
	for _, s := range e.Sandboxes(nil) {
		if s.ID == spare {
			t.Errorf("the spare %s outlived Serve", spare)
		}
	}
	if n := len(e.Sandboxes(nil)); n != 3 {
		t.Errorf("%d sandboxes after Serve's end, want the clients' 3", n)
	}
}

// TestE2BSpareYieldsRoom: when the spare holds the last room, a create of
// another shape gets it (the spare is closed) instead of waiting in line
// behind a sandbox nobody uses.
func TestE2BSpareYieldsRoom(t *testing.T) {
	url, e, _ := serveEngine(t, engine.Config{MaxSandboxes: 2, GradingReserve: -1})
	a := createWith(t, url, `{}`)
	spare := newSandbox(t, e, a)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // else a create in line waits for ever
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v2/sandboxes", strings.NewReader(`{"envVars": {"X": "1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", testKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("a create of another shape with the spare holding the last room: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("a create of another shape with the spare holding the last room: %d", res.StatusCode)
	}
	for _, s := range e.Sandboxes(nil) {
		if s.ID == spare {
			t.Errorf("the spare %s still holds its room", spare)
		}
	}
}
