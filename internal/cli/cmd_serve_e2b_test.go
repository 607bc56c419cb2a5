package cli

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeE2B: msb serve --e2b answers the E2B API on its own listener
// with the daemon's token as the API key, and stops cleanly at SIGTERM
// (startServe checks); without a token it is a usage error, as is
// --e2b-base without --e2b, and a base the cache lacks stops it.
func TestServeE2B(t *testing.T) {
	if r := msb(t, t.TempDir(), nil, "serve", "--e2b", "127.0.0.1:0"); r.code != exitUsage || !strings.Contains(r.stderr, "--e2b needs a token") {
		t.Errorf("serve --e2b without a token: exit %d %q, want %d naming the token", r.code, r.stderr, exitUsage)
	}
	if r := msb(t, t.TempDir(), nil, "serve", "--e2b-base", "debian/e2b"); r.code != exitUsage || !strings.Contains(r.stderr, "--e2b-base goes with --e2b") {
		t.Errorf("serve --e2b-base without --e2b: exit %d %q, want %d", r.code, r.stderr, exitUsage)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("e2b-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	list := func(key string) (int, []any) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v2/sandboxes", nil)
		req.Header.Set("X-API-Key", key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil
		}
		defer res.Body.Close()
		var body []any
		json.NewDecoder(res.Body).Decode(&body)
		return res.StatusCode, body
	}
	startServe(t, func() bool { s, _ := list("e2b-secret"); return s == http.StatusOK }, nil,
		"--listen", "unix://"+filepath.Join(dir, "msb.sock"), "--token-file", tokenFile, "--e2b", addr)
	if s, _ := list("wrong"); s != http.StatusUnauthorized {
		t.Errorf("E2B list with a wrong API key: %d, want 401", s)
	}
	if s, body := list("e2b-secret"); s != http.StatusOK || len(body) != 0 {
		t.Errorf("E2B list: %d %v, want 200 []", s, body)
	}
	r := msb(t, dir, nil, "serve", "--listen", "unix://"+filepath.Join(dir, "msb2.sock"), "--token-file", tokenFile,
		"--e2b", "127.0.0.1:0", "--e2b-base", "debian/msb-test-never-built")
	if r.code == 0 || !strings.Contains(r.stderr, "--e2b-base: the E2B base debian/msb-test-never-built") {
		t.Errorf("serve --e2b-base of a base the cache lacks: exit %d %q, want a failure naming it", r.code, r.stderr)
	}
}
