package regproxy

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// silentUpstream listens on loopback, takes every connection and never
// answers on it (an upstream behind a firewall that drops its replies, a
// hung registry); it returns its URL.
func silentUpstream(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// syncBuffer is a log's buffer that the proxy's handlers write to
// concurrently.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSilentUpstream: with an upstream that takes the connection and
// never answers, a re-check of what the cache keeps (a Go list and
// @latest, a crate's index file, Maven metadata) serves the kept copy
// after RecheckWait (not FetchWait) and logs it, the first only: the
// next re-checks of that host serve the kept copy at once; a fetch of what the cache lacks fails
// after FetchWait with a 502 naming the upstream and what to do. The
// client's own timeout (an hour here) is never what ends a request.
func TestSilentUpstream(t *testing.T) {
	up := silentUpstream(t)
	dir := t.TempDir()
	kept := map[string]string{
		"go/example.com/m/@v/list":              "v1.0.0\n",
		"go/example.com/m/@latest":              `{"Version":"v1.0.0"}`,
		"cargo/index/it/oa/itoa":                `{"name":"itoa","vers":"1.0.11","cksum":"` + strings.Repeat("0", 64) + `"}` + "\n",
		"maven2/junit/junit/maven-metadata.xml": "<metadata><versioning><latest>4.13.2</latest></versioning></metadata>\n",
	}
	for rel, body := range kept {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logged syncBuffer
	p := &Proxy{Dir: dir, NPM: up, Go: up, Cargo: up, Maven: up,
		Client: &http.Client{Timeout: time.Hour}, Log: slog.New(slog.NewTextHandler(&logged, nil)),
		RecheckWait: 100 * time.Millisecond, FetchWait: 200 * time.Millisecond}
	base := start(t, p)

	rechecks := map[string]string{
		"/go/example.com/m/@v/list":              "go/example.com/m/@v/list",
		"/go/example.com/m/@latest":              "go/example.com/m/@latest",
		"/cargo/index/it/oa/itoa":                "cargo/index/it/oa/itoa",
		"/maven2/junit/junit/maven-metadata.xml": "maven2/junit/junit/maven-metadata.xml",
	}
	for path, rel := range rechecks {
		if code, body := get(t, base+path); code != http.StatusOK || body != kept[rel] {
			t.Errorf("re-check of %s with a silent upstream: %d %q, want 200 and the kept copy %q", path, code, body, kept[rel])
		}
	}
	var asked, skipped int
	for _, l := range strings.Split(logged.String(), "\n") {
		if !strings.Contains(l, "did not answer the re-check") {
			continue
		}
		switch {
		case strings.Contains(l, "no answer within 100ms"):
			asked++
		case strings.Contains(l, "re-checks are not asked again until"):
			skipped++
		}
	}
	if asked != 1 || skipped != len(rechecks)-1 {
		t.Errorf("the log has %d re-checks that waited RecheckWait and %d served at once (the host silent), want 1 and %d:\n%s",
			asked, skipped, len(rechecks)-1, logged.String())
	}

	for _, path := range []string{"/go/example.com/m/@v/v1.0.0.mod", "/cargo/index/se/rd/serde", "/npm/left-pad",
		"/maven2/junit/junit/4.13.2/junit-4.13.2.pom"} {
		code, body := get(t, base+path)
		if code != http.StatusBadGateway {
			t.Errorf("fetch of %s with a silent upstream: %d %q, want 502", path, code, body)
			continue
		}
		for _, want := range []string{up, "no answer within 200ms", "check that this host reaches " + strings.TrimPrefix(up, "http://")} {
			if !strings.Contains(body, want) {
				t.Errorf("fetch of %s: the error %q does not say %q", path, body, want)
			}
		}
	}
}
