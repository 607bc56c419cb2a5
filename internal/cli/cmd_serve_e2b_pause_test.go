package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeE2BShutdownPause: SIGTERM to msb serve --e2b pauses its
// running E2B sandboxes by default (--e2b-shutdown-pause): a daemon started
// again on the same cache lists the sandbox paused, and an envd call
// resumes it with the file written before. A negative
// --e2b-shutdown-pause is a usage error.
func TestServeE2BShutdownPause(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("e2b-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := msb(t, dir, nil, "serve", "--token-file", tokenFile, "--e2b", "127.0.0.1:0", "--e2b-shutdown-pause", "-1s"); r.code != exitUsage ||
		!strings.Contains(r.stderr, "--e2b-shutdown-pause must not be negative") {
		t.Errorf("serve --e2b-shutdown-pause -1s: exit %d %q, want %d naming the flag", r.code, r.stderr, exitUsage)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	env := []string{"MSB_STATE_DIR=" + stateDir(t), "MSB_CACHE=" + filepath.Join(dir, "cache")}
	call := func(method, path, body string, header map[string]string) (int, string) {
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("X-API-Key", "e2b-secret")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	serve := func() (stop func() string) {
		cmd := msbCmd(t, dir, env, "serve", "--listen", "unix://"+filepath.Join(dir, "msb.sock"), "--token-file", tokenFile, "--e2b", l.Addr().String())
		var logs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
			if s, _ := call("GET", "/v2/sandboxes", "", nil); s == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("msb serve --e2b did not come up:\n%s", logs.String())
			}
		}
		return func() string {
			cmd.Process.Signal(syscall.SIGTERM)
			if err := cmd.Wait(); err != nil {
				t.Errorf("msb serve after SIGTERM: %v\n%s", err, logs.String())
			}
			return logs.String()
		}
	}

	stop := serve()
	status, body := call("POST", "/v2/sandboxes", `{"timeout": 3600}`, nil)
	var created struct {
		ID    string `json:"sandboxID"`
		Token string `json:"envdAccessToken"`
	}
	json.Unmarshal([]byte(body), &created)
	envd := map[string]string{"E2b-Sandbox-Id": created.ID, "X-Access-Token": created.Token, "Content-Type": "application/octet-stream"}
	if status == http.StatusCreated {
		status, body = call("POST", "/files?path=/root/kept.txt", "before SIGTERM", envd)
	}
	logs := stop()
	if status != http.StatusOK {
		t.Fatalf("create and write a file: %d %s", status, body)
	}
	if !strings.Contains(logs, "e2b sandboxes paused for the next daemon") {
		t.Errorf("no shutdown pause in the log:\n%s", logs)
	}

	stop = serve()
	defer stop()
	if status, body := call("GET", "/sandboxes/"+created.ID, "", nil); status != http.StatusOK || !strings.Contains(body, `"state":"paused"`) {
		t.Errorf("get after the restart: %d %s, want it paused", status, body)
	}
	if status, body := call("GET", "/files?path=/root/kept.txt", "", envd); status != http.StatusOK || body != "before SIGTERM" {
		t.Errorf("an envd read after the restart: %d %q, want the sandbox resumed and its file", status, body)
	}
	if status, body := call("DELETE", "/sandboxes/"+created.ID, "", nil); status != http.StatusNoContent {
		t.Errorf("kill: %d %s", status, body)
	}
}
