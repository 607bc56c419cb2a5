package e2b

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
)

// TestLifecycleOf: a create's lifecycle fields as E2B's API checks them.
func TestLifecycleOf(t *testing.T) {
	on, off := true, false
	enabled := &struct {
		Enabled bool `json:"enabled"`
	}{true}
	for _, tc := range []struct {
		name string
		req  lifecycleRequest
		want lifecycle
		bad  bool
	}{
		{"nothing: kill", lifecycleRequest{}, lifecycle{Timeout: time.Minute}, false},
		{"pause", lifecycleRequest{AutoPause: &on}, lifecycle{AutoPause: true, Timeout: time.Minute}, false},
		{"pause, memory asked: files only", lifecycleRequest{AutoPause: &on, AutoPauseMemory: &on}, lifecycle{AutoPause: true, Timeout: time.Minute}, false},
		{"pause and resume", lifecycleRequest{AutoPause: &on, AutoResume: enabled}, lifecycle{AutoPause: true, AutoResume: true, Timeout: time.Minute}, false},
		{"resume without pause", lifecycleRequest{AutoPause: &off, AutoResume: enabled}, lifecycle{}, true},
		{"resume of a filesystem pause", lifecycleRequest{AutoPause: &on, AutoPauseMemory: &off, AutoResume: enabled}, lifecycle{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := lifecycleOf(tc.req, time.Minute)
			if tc.bad {
				if engine.Kind(err) != engine.Kind(engine.ErrBadRequest) {
					t.Fatalf("got %+v, %v; want a bad request", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestE2BLifecycle: on_timeout pause, connect after it, auto_resume by
// an envd call and get_info's lifecycle, through the SDK.
func TestE2BLifecycle(t *testing.T) {
	out := sdkScript(t, "sdk_lifecycle.py")
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	want := map[string]string{
		"default_lifecycle":      "map[auto_resume:false on_timeout:kill]",
		"lifecycle":              "map[auto_resume:false on_timeout:pause]",
		"after_timeout":          "paused",
		"envd_while_paused":      "SandboxNotRunningException",
		"resumed":                "[before the timeout running pause]",
		"auto_lifecycle":         "map[auto_resume:true on_timeout:pause]",
		"auto_after_timeout":     "paused",
		"auto_resumed":           "[auto running]",
		"filesystem_auto_resume": "InvalidArgumentException",
		"filesystem_lifecycle":   "map[auto_resume:false on_timeout:pause]",
	}
	for k, w := range want {
		if g := fmt.Sprint(got[k]); g != w {
			t.Errorf("%s: %q, want %q", k, g, w)
		}
	}
	if ids, _ := got["listed_paused"].([]any); len(ids) != 1 {
		t.Errorf("Sandbox.list(state paused) after the timeout: %v, want the one sandbox", got["listed_paused"])
	}
}

// TestE2BAutoPauseRestart: a sandbox auto-paused at its timeout is
// recorded as an explicit pause is: a new daemon on the same cache lists
// it paused with its lifecycle, and an envd call resumes it (autoResume)
// with the file written before. No SDK: it runs rootless too.
func TestE2BAutoPauseRestart(t *testing.T) {
	state, cache := privtest.StateDir(t), filepath.Join(t.TempDir(), "cache")
	first := startDaemon(t, state, cache)
	status, body := send(t, "POST", first.url+"/v2/sandboxes", `{"templateID": "base", "timeout": 3600, "autoPause": true, "autoResume": {"enabled": true}}`, nil)
	if status != http.StatusCreated {
		first.stop()
		t.Fatalf("create: %d %s", status, body)
	}
	var created struct {
		ID    string `json:"sandboxID"`
		Token string `json:"envdAccessToken"`
	}
	json.Unmarshal([]byte(body), &created)
	envd := map[string]string{"E2b-Sandbox-Id": created.ID, "X-Access-Token": created.Token}
	if status, body := send(t, "POST", first.url+"/files?path=/root/kept.txt", "before the restart", envd); status != http.StatusOK {
		first.stop()
		t.Fatalf("writing a file: %d %s", status, body)
	}
	if status, body := send(t, "POST", first.url+"/sandboxes/"+created.ID+"/timeout", `{"timeout": 1}`, nil); status != http.StatusNoContent {
		first.stop()
		t.Fatalf("set timeout: %d %s", status, body)
	}
	got := waitState(t, first.url, created.ID, "paused")
	if err := first.stop(); err != nil {
		t.Fatalf("stopping the first daemon: %v", err)
	}
	if got != "paused" {
		t.Fatalf("a minute after a 1 s timeout with autoPause the sandbox is %q, want paused", got)
	}

	second := startDaemon(t, state, cache)
	defer func() {
		if err := second.stop(); err != nil {
			t.Errorf("stopping the second daemon: %v", err)
		}
	}()
	status, body = send(t, "GET", second.url+"/sandboxes/"+created.ID, "", nil)
	if status != http.StatusOK || !strings.Contains(body, `"state":"paused"`) || !strings.Contains(body, `"lifecycle":{"autoResume":true,"onTimeout":"pause"}`) {
		t.Fatalf("get after the restart: %d %s, want it paused with its lifecycle", status, body)
	}
	if status, body := send(t, "GET", second.url+"/files?path=/root/kept.txt", "", map[string]string{"E2b-Sandbox-Id": created.ID, "X-Access-Token": "wrong"}); status != http.StatusUnauthorized {
		t.Errorf("an envd call with a wrong token to the paused sandbox: %d %s, want 401", status, body)
	}
	if _, body := send(t, "GET", second.url+"/sandboxes/"+created.ID, "", nil); !strings.Contains(body, `"state":"paused"`) {
		t.Errorf("a refused envd call resumed the sandbox: %s", body)
	}
	status, body = send(t, "GET", second.url+"/files?path=/root/kept.txt", "", envd)
	if status != http.StatusOK || body != "before the restart" {
		t.Errorf("reading the file through envd after the restart: %d %q, want it auto-resumed and the file", status, body)
	}
	if _, body := send(t, "GET", second.url+"/sandboxes/"+created.ID, "", nil); !strings.Contains(body, `"state":"running"`) {
		t.Errorf("get after the envd call: %s, want running", body)
	}
	if status, body := send(t, "DELETE", second.url+"/sandboxes/"+created.ID, "", nil); status != http.StatusNoContent {
		t.Errorf("kill: %d %s", status, body)
	}
}

// send sends body (if any) with the API key and header, and returns the
// status and the body read.
func send(t *testing.T, method, url, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", testKey)
	req.Header.Set("Content-Type", "application/json")
	if strings.Contains(url, "/files") {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// waitState polls get until the sandbox is in state, a minute at most
// (a bound on a stuck front end, not a speed), and returns the last state
// ("gone" once get is a 404).
func waitState(t *testing.T, url, id, state string) string {
	t.Helper()
	var got struct {
		State string `json:"state"`
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		status, body := send(t, "GET", url+"/sandboxes/"+id, "", nil)
		if status == http.StatusNotFound {
			return "gone"
		}
		json.Unmarshal([]byte(body), &got)
		if got.State == state || time.Now().After(deadline) {
			return got.State
		}
	}
}

// TestE2BAutoPauseRacesPause: a timeout that comes while pause runs (or
// the other way round) leaves the sandbox paused, never killed: the
// auto-pause waits for the pause and finds it done.
func TestE2BAutoPauseRacesPause(t *testing.T) {
	url := startFront(t)
	for i := range 5 {
		status, body := send(t, "POST", url+"/v2/sandboxes", `{"timeout": 3600, "autoPause": true}`, nil)
		if status != http.StatusCreated {
			t.Fatalf("create: %d %s", status, body)
		}
		var created struct {
			ID string `json:"sandboxID"`
		}
		json.Unmarshal([]byte(body), &created)
		paused := make(chan int, 1)
		go func() {
			status, _ := send(t, "POST", url+"/sandboxes/"+created.ID+"/pause", "", nil)
			paused <- status
		}()
		if status, body := send(t, "POST", url+"/sandboxes/"+created.ID+"/timeout", `{"timeout": 0}`, nil); status != http.StatusNoContent && status != http.StatusNotFound {
			t.Errorf("round %d: set timeout 0: %d %s", i, status, body) // 404: the pause came first
		}
		if status := <-paused; status != http.StatusNoContent && status != http.StatusConflict {
			t.Errorf("round %d: pause: %d, want 204 (or 409: the auto-pause came first)", i, status)
		}
		if got := waitState(t, url, created.ID, "paused"); got != "paused" {
			t.Fatalf("round %d: a pause racing the timeout left the sandbox %q, want paused", i, got)
		}
		if status, body := send(t, "DELETE", url+"/sandboxes/"+created.ID, "", nil); status != http.StatusNoContent {
			t.Errorf("round %d: kill: %d %s", i, status, body)
		}
	}
}
