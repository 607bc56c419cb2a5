package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
)

func TestMain(m *testing.M) { demotest.Main(m, gen) }

// gen is the fixture whose TestMain serves as the sandboxes' init; these
// tests use the host base, not the demo project.
var gen = demotest.New("msb-e2b-test-")

const testKey = "e2b-test-key"

// startFront serves an engine's E2B front end on loopback and returns its
// URL; both are closed after the test.
func startFront(t *testing.T) string {
	t.Helper()
	url, _ := startFrontEngine(t)
	return url
}

// startFrontEngine is startFront that also returns the engine.
func startFrontEngine(t *testing.T) (string, *engine.Engine) {
	t.Helper()
	return startFrontWith(t, nil)
}

// startFrontWith is startFrontEngine with setup (if not nil) run on the
// engine and its front before the front serves.
func startFrontWith(t *testing.T, setup func(*engine.Engine, *Front)) (string, *engine.Engine) {
	t.Helper()
	e, err := engine.Open(context.Background(), engine.Config{StateDir: privtest.StateDir(t),
		Cache: engine.CacheConfig{Dir: filepath.Join(t.TempDir(), "cache")}})
	if err != nil {
		t.Fatal(err)
	}
	front := New(e, testKey, nil)
	if setup != nil {
		setup(e, front)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- front.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return "http://" + l.Addr().String(), e
}

// call sends a request and returns the status and the decoded JSON body.
func call(t *testing.T, method, url string, header map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
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
	var body map[string]any
	if res.StatusCode == http.StatusNoContent {
		return res.StatusCode, nil
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("%s %s: %d %q is not a JSON object: %v", method, url, res.StatusCode, b, err)
	}
	return res.StatusCode, body
}

func TestE2BAuthAndUnknownSandbox(t *testing.T) {
	url := startFront(t)
	for _, key := range []string{"", "wrong"} {
		status, body := call(t, "POST", url+"/v2/sandboxes", map[string]string{"X-API-Key": key})
		if status != http.StatusUnauthorized || body["code"] != float64(401) || body["message"] == "" {
			t.Errorf("create with API key %q: %d %v, want 401 {code, message}", key, status, body)
		}
	}
	ok := map[string]string{"X-API-Key": testKey}
	for _, m := range []string{"GET", "DELETE"} {
		status, body := call(t, m, url+"/sandboxes/nope", ok)
		if status != http.StatusNotFound || body["code"] != float64(404) || !strings.Contains(body["message"].(string), "nope") {
			t.Errorf("%s an unknown sandbox: %d %v, want 404 {code, message}", m, status, body)
		}
	}
	// The sandbox plane answers an unknown id as E2B's proxy does: a 502
	// whose message the SDK turns into SandboxNotRunningException.
	status, body := call(t, "POST", url+"/process.Process/List", map[string]string{"E2b-Sandbox-Id": "nope", "Content-Type": "application/json"})
	if status != http.StatusBadGateway || !strings.Contains(body["message"].(string), "was not found") {
		t.Errorf("envd call to an unknown sandbox: %d %v, want 502 ... was not found", status, body)
	}
}

func TestE2BAccessToken(t *testing.T) {
	url := startFront(t)
	status, created := call(t, "POST", url+"/v2/sandboxes", map[string]string{"X-API-Key": testKey})
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, created)
	}
	id := created["sandboxID"].(string)
	for _, tok := range []string{"", "wrong", testKey} {
		status, body := call(t, "POST", url+"/process.Process/List", map[string]string{"E2b-Sandbox-Id": id, "X-Access-Token": tok, "Content-Type": "application/json"})
		if status != http.StatusUnauthorized {
			t.Errorf("envd call with access token %q: %d %v, want 401", tok, status, body)
		}
	}
	status, body := call(t, "POST", url+"/process.Process/List", map[string]string{"E2b-Sandbox-Id": id,
		"X-Access-Token": created["envdAccessToken"].(string), "Content-Type": "application/json"})
	if status != http.StatusOK {
		t.Errorf("envd call with the sandbox's access token: %d %v, want 200", status, body)
	}
	if status, body := call(t, "DELETE", url+"/sandboxes/"+id, map[string]string{"X-API-Key": testKey}); status != http.StatusNoContent {
		t.Fatalf("kill: %d %v", status, body)
	}
	status, body = call(t, "POST", url+"/process.Process/List", map[string]string{"E2b-Sandbox-Id": id,
		"X-Access-Token": created["envdAccessToken"].(string), "Content-Type": "application/json"})
	if status != http.StatusBadGateway {
		t.Errorf("envd call to a killed sandbox: %d %v, want 502", status, body)
	}
}

// TestE2BTimeout: a sandbox is killed when its timeout ends, and
// set_timeout moves the end.
func TestE2BTimeout(t *testing.T) {
	url := startFront(t)
	key := map[string]string{"X-API-Key": testKey}
	req, _ := http.NewRequest("POST", url+"/v2/sandboxes", strings.NewReader(`{"templateID": "base", "timeout": 3600, "unknownField": 1}`))
	req.Header.Set("X-API-Key", testKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created map[string]any
	json.NewDecoder(res.Body).Decode(&created)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %v", res.StatusCode, created)
	}
	id := created["sandboxID"].(string)
	if status, body := call(t, "GET", url+"/sandboxes/"+id, key); status != http.StatusOK || body["state"] != "running" {
		t.Fatalf("get: %d %v", status, body)
	}
	req, _ = http.NewRequest("POST", url+"/sandboxes/"+id+"/timeout", strings.NewReader(`{"timeout": 1}`))
	req.Header.Set("X-API-Key", testKey)
	if res, err = http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("set timeout: %v %v", res, err)
	}
	res.Body.Close()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		status, _ := call(t, "GET", url+"/sandboxes/"+id, key)
		if status == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox is still there (%d) a minute after a 1 s timeout", status)
		}
	}
}

// sdkScript runs a script of testdata with the e2b SDK from PyPI pointed
// at a fresh front end, and returns what it printed.
func sdkScript(t *testing.T, script string, args ...string) []byte {
	t.Helper()
	return sdkScriptAt(t, "", script, args...)
}

// sdkScriptAt is sdkScript against the front at url ("": a new one).
func sdkScriptAt(t *testing.T, url, script string, args ...string) []byte {
	t.Helper()
	if url == "" {
		url = startFront(t)
	}
	return sdkScriptEnv(t, []string{"E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url}, script, args...)
}

// sdkScriptEnv runs a script of testdata with the e2b SDK, the API key and
// env (KEY=VALUE, over the test's environment), and returns what it printed.
func sdkScriptEnv(t *testing.T, env []string, script string, args ...string) []byte {
	t.Helper()
	py := privtest.Python(t, "the e2b SDK (internal/server/testdata/requirements.txt)")
	if out, err := exec.Command(py, "-c", "import e2b").CombinedOutput(); err != nil {
		privtest.Skip(t, "%s=%s lacks the e2b SDK: %v %s", privtest.PythonEnv, py, err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{filepath.Join(testdata(), script)}, args...)...)
	cmd.Env = append(append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONFAULTHANDLER=1", "E2B_API_KEY="+testKey), env...)
	cmd.Stderr = &strings.Builder{}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s%s", script, err, out, cmd.Stderr)
	}
	return out
}

// testdataEnv names the absolute path of this package's testdata for a
// rootless rerun, which runs in a directory of its own (rootless_test.go).
const testdataEnv = "MSB_TEST_E2B_TESTDATA"

// testdata is the directory of the SDK scripts.
func testdata() string {
	if d := os.Getenv(testdataEnv); d != "" {
		return d
	}
	return "testdata"
}

// TestE2BAsyncSDK: the SDK's asyncio form, many commands at once.
func TestE2BAsyncSDK(t *testing.T) {
	out := sdkScript(t, "sdk_async.py")
	var got struct {
		Outputs []string `json:"outputs"`
		Chunks  []string `json:"chunks"`
		Stdin   []any    `json:"stdin"`
		Pty     []any    `json:"pty"`
		Forked  []string `json:"forked"`
		Resumed string   `json:"resumed"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	if len(got.Outputs) != 20 {
		t.Fatalf("%d results of 20 concurrent commands", len(got.Outputs))
	}
	for i, o := range got.Outputs {
		if o != fmt.Sprintf("%d\n", i) {
			t.Errorf("concurrent command %d printed %q", i, o)
		}
	}
	if strings.Join(got.Chunks, "") != "1\n2\n3\n" || len(got.Chunks) < 2 {
		t.Errorf("on_stdout saw %q, want 1 2 3 in more than one chunk (streamed, not at the end)", got.Chunks)
	}
	if fmt.Sprint(got.Stdin) != fmt.Sprint([]any{"async in\n", float64(0)}) {
		t.Errorf("cat given stdin: its output and the exit code a later connect saw: %q, want what was sent and 0", got.Stdin)
	}
	if fmt.Sprint(got.Pty) != fmt.Sprint([]any{float64(5), true}) {
		t.Errorf("an async pty resized to 30x90 that printed its size and ran exit 5: %v, want exit 5 and size=30 90 seen", got.Pty)
	}
	if fmt.Sprint(got.Forked) != "[forked forked]" || got.Resumed != "forked" {
		t.Errorf("async fork(count=2) read %q, pause then connect %q; want the parent's file in each", got.Forked, got.Resumed)
	}
}

// TestE2BPythonSDK drives the front end with the e2b SDK from PyPI.
func TestE2BPythonSDK(t *testing.T) {
	out := sdkScript(t, "sdk_roundtrip.py")
	var got struct {
		Stdout          string      `json:"stdout"`
		ExitCode        int         `json:"exit_code"`
		FailedExitCode  *int        `json:"failed_exit_code"`
		FailedStderr    string      `json:"failed_stderr"`
		Env             string      `json:"env"`
		Read            string      `json:"read"`
		List            []string    `json:"list"`
		ExistsMissing   bool        `json:"exists_missing"`
		Listed          [][2]any    `json:"listed"`
		MakeDir         []bool      `json:"make_dir"`
		AfterMoves      [][2]string `json:"after_moves"`
		Running         []bool      `json:"running"`
		Killed          bool        `json:"killed"`
		Unknown         *string     `json:"unknown"`
		ListedAfterKill int         `json:"listed_after_kill"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	if got.Stdout != "hi\n" || got.ExitCode != 0 {
		t.Errorf(`commands.run("echo hi"): stdout %q exit %d, want "hi\n" 0`, got.Stdout, got.ExitCode)
	}
	if got.FailedExitCode == nil || *got.FailedExitCode != 3 || got.FailedStderr != "oops\n" {
		t.Errorf("a failing command: exit %v stderr %q, want CommandExitException 3 with stderr oops", got.FailedExitCode, got.FailedStderr)
	}
	if got.Env != "hello\n" {
		t.Errorf("create's envs in a command: %q, want hello", got.Env)
	}
	if got.Read != "round trip\n" || len(got.List) != 1 || got.List[0] != "hello.txt" || got.ExistsMissing {
		t.Errorf("files: read %q, list %v, exists(missing) %v", got.Read, got.List, got.ExistsMissing)
	}
	if len(got.MakeDir) != 2 || !got.MakeDir[0] || got.MakeDir[1] {
		t.Errorf("make_dir twice: %v, want [true false]", got.MakeDir)
	}
	if len(got.AfterMoves) != 1 || got.AfterMoves[0] != [2]string{"e", "dir"} {
		t.Errorf("after rename d->e and removing hello.txt the directory holds %v, want [[e dir]]", got.AfterMoves)
	}
	if len(got.Running) != 1 || !got.Running[0] || !got.Killed {
		t.Errorf("a background command: commands.list() %v, kill %v; want it listed and killed", got.Running, got.Killed)
	}
	if len(got.Listed) != 1 || got.Listed[0][0] != true {
		t.Errorf("Sandbox.list(): %v, want the one sandbox", got.Listed)
	} else if md, _ := got.Listed[0][1].(map[string]any); md["suite"] != "e2b-test" {
		t.Errorf("Sandbox.list() metadata %v, want suite=e2b-test", got.Listed[0][1])
	}
	if got.Unknown == nil || *got.Unknown != "SandboxNotFoundException" && *got.Unknown != "NotFoundException" {
		t.Errorf("get_info of an unknown sandbox raised %v, want a NotFoundException", got.Unknown)
	}
	if got.ListedAfterKill != 0 {
		t.Errorf("Sandbox.list() after kill: %d sandboxes, want 0", got.ListedAfterKill)
	}
}

// TestE2BStdinAndReconnect: stdin (send, stream, close) and a background
// process that outlives the client that started it, whose next client
// reads its output from where the last one left off.
func TestE2BStdinAndReconnect(t *testing.T) {
	out := sdkScript(t, "sdk_stdin.py")
	var got struct {
		Sent            []any   `json:"sent"`
		Streamed        string  `json:"streamed"`
		ListedWhileAway bool    `json:"listed_while_away"`
		Reconnected     []any   `json:"reconnected"`
		ListedAfterEnd  int     `json:"listed_after_end"`
		NoStdin         *string `json:"no_stdin"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	if fmt.Sprint(got.Sent) != fmt.Sprint([]any{"hello\nworld\n", float64(0)}) {
		t.Errorf("cat after send_stdin hello, world and close_stdin: %v, want hello world, exit 0", got.Sent)
	}
	if got.Streamed != "6" {
		t.Errorf("wc -c after stream_input ab cd é: %q, want 6", got.Streamed)
	}
	if !got.ListedWhileAway {
		t.Error("a background process was not listed after its client disconnected")
	}
	if fmt.Sprint(got.Reconnected) != fmt.Sprint([]any{"first\n", "second\nthird\n", float64(0)}) {
		t.Errorf("before and after reconnecting: %q, want first, then second third and exit 0", got.Reconnected)
	}
	if got.ListedAfterEnd != 0 {
		t.Errorf("commands.list() after the process ended: %d processes", got.ListedAfterEnd)
	}
	if got.NoStdin == nil {
		t.Error("send_stdin to an ended process without stdin succeeded")
	}
}

// TestE2BPty: a login bash on a terminal through sandbox.pty: its size,
// input, resize (stty size sees it), a reconnecting client, kill and exit.
func TestE2BPty(t *testing.T) {
	out := sdkScript(t, "sdk_pty.py")
	var got struct {
		Size        string `json:"size"`
		TTY         string `json:"tty"`
		Answer      string `json:"answer"`
		Resized     string `json:"resized"`
		Reconnected string `json:"reconnected"`
		Listed      bool   `json:"listed"`
		Killed      bool   `json:"killed"`
		Exit        int    `json:"exit"`
		ListedAfter int    `json:"listed_after"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	if got.Size != "24 80" || got.TTY != "tty=yes:/tmp" {
		t.Errorf("stty size and a tty test in a 24x80 pty with cwd /tmp: %q %q, want 24 80 and tty=yes:/tmp", got.Size, got.TTY)
	}
	if got.Answer != "42" || got.Resized != "50 100" {
		t.Errorf("echo $((6*7)), then stty size after resize to 50x100: %q %q, want 42 and 50 100", got.Answer, got.Resized)
	}
	if got.Reconnected != "back2" || !got.Listed || !got.Killed {
		t.Errorf("after reconnecting: %q, listed %v, kill %v; want back2, listed and killed", got.Reconnected, got.Listed, got.Killed)
	}
	if got.Exit != 3 || got.ListedAfter != 0 {
		t.Errorf("exit 3 in a pty: exit code %d, %d processes listed after; want 3 and 0", got.Exit, got.ListedAfter)
	}
}

// TestE2BSnapshotsForkPause: create_snapshot, list_snapshots, a sandbox
// created from a snapshot, fork(count), pause and connect (resume under
// the same id), delete_snapshot, through the SDK.
func TestE2BSnapshotsForkPause(t *testing.T) {
	out := sdkScript(t, "sdk_snapshots.py")
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	want := map[string]string{
		"snapshot":            `[e2b-test-snap [e2b-test-snap]]`,
		"listed":              `[e2b-test-snap]`,
		"from_snapshot":       `v1`,
		"fork":                `[Sandbox Sandbox]`,
		"fork_reads":          `[kid0 v1 v1]`,
		"fork_ids":            `3`,
		"paused":              `[true false]`,
		"state":               `paused`,
		"listed_paused":       `true`,
		"resumed":             "[true v2 up\n running]",
		"connect_running":     "same\n",
		"deleted":             `[true false]`,
		"listed_after_delete": `0`,
	}
	for k, w := range want {
		if g := fmt.Sprint(got[k]); g != w {
			t.Errorf("%s: %q, want %q", k, g, w)
		}
	}
}

// TestE2BBadBodies: a body the front end cannot decode is a 400 with
// E2B's {code, message}, never a 500, on every route that reads one.
func TestE2BBadBodies(t *testing.T) {
	url := startFront(t)
	for _, route := range []string{"/v2/sandboxes", "/sandboxes/x/timeout", "/sandboxes/x/fork",
		"/sandboxes/x/connect", "/v2/sandboxes/x/connect", "/sandboxes/x/snapshots"} {
		req, _ := http.NewRequest("POST", url+route, strings.NewReader(`{"timeout": "soon", "count": "many", "name": 7}`))
		req.Header.Set("X-API-Key", testKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || body["code"] != float64(400) || body["message"] == "" {
			t.Errorf("POST %s with a bad body: %d %v, want 400 {code, message}", route, res.StatusCode, body)
		}
	}
}

// TestE2BConcurrentConnects: connects racing to resume one paused sandbox
// start one engine sandbox, not one each. (Its create has envVars, so
// the front keeps no spare of the base template beside it: spare.go.)
func TestE2BConcurrentConnects(t *testing.T) {
	url, e := startFrontEngine(t)
	key := map[string]string{"X-API-Key": testKey}
	id := createWith(t, url, `{"envVars": {"A": "1"}}`)
	if status, body := call(t, "POST", url+"/sandboxes/"+id+"/pause", key); status != http.StatusNoContent {
		t.Fatalf("pause: %d %v", status, body)
	}
	if n := len(e.Sandboxes(nil)); n != 0 {
		t.Fatalf("%d engine sandboxes while the only one is paused", n)
	}
	statuses := make(chan int, 4)
	for range 4 {
		go func() {
			req, _ := http.NewRequest("POST", url+"/v2/sandboxes/"+id+"/connect", strings.NewReader(`{"timeout": 60}`))
			req.Header.Set("X-API-Key", testKey)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				statuses <- 0
				return
			}
			res.Body.Close()
			statuses <- res.StatusCode
		}()
	}
	var got []int
	for range 4 {
		got = append(got, <-statuses)
	}
	sort.Ints(got)
	if fmt.Sprint(got) != "[200 200 200 201]" {
		t.Errorf("four connects to a paused sandbox answered %v, want one 201 (resumed) and three 200", got)
	}
	if n := len(e.Sandboxes(nil)); n != 1 {
		t.Errorf("%d engine sandboxes after four racing connects, want 1", n)
	}
	if status, body := call(t, "DELETE", url+"/sandboxes/"+id, key); status != http.StatusNoContent {
		t.Fatalf("kill: %d %v", status, body)
	}
}

// nodeSDKDir holds the e2b npm SDK pinned in its package-lock.json, which
// make test-npm installs (npm ci) into its node_modules.
const nodeSDKDir = "testdata/js"

// TestE2BNodeSDK drives the front end with the e2b npm SDK: a script that
// asserts each step (commands, stdin, files, list, fork, pause and
// connect, kill) and exits non-zero with the failed step's message.
func TestE2BNodeSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		privtest.Skip(t, "no node on PATH for the e2b npm SDK: %v", err)
	}
	if _, err := os.Stat(filepath.Join(nodeSDKDir, "node_modules", "e2b", "package.json")); err != nil {
		privtest.Skip(t, "the e2b npm SDK is not installed (make test-npm runs npm ci in %s): %v", nodeSDKDir, err)
	}
	url := startFront(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "sdk_roundtrip.mjs")
	cmd.Dir = nodeSDKDir
	cmd.Env = append(os.Environ(), "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "E2B_API_KEY="+testKey)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sdk_roundtrip.mjs: %v\n%s", err, out)
	}
	if string(out) != "ok\n" {
		t.Errorf("sdk_roundtrip.mjs printed %q, want ok", out)
	}
}

// TestE2BOutputBytes: a command's output that is not UTF-8 reaches the
// SDK as the bytes it wrote, which the SDK shows with U+FFFD for what it
// cannot decode, as E2B's test_run_with_broken_utf8 expects. Before, the
// engine's \xNN text for such a byte reached the SDK as four characters.
func TestE2BOutputBytes(t *testing.T) {
	out := sdkScript(t, "sdk_bytes.py")
	var got struct {
		BrokenUTF8 []any    `json:"broken_utf8"`
		Both       []string `json:"both"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	if want := fmt.Sprint([]any{float64(0), float64(8192), "a\ufffd"}); fmt.Sprint(got.BrokenUTF8) != want {
		t.Errorf(`printf "a"*8191 + "\xe2": exit code, length and end of stdout %v, want %v`, got.BrokenUTF8, want)
	}
	if want := fmt.Sprint([]string{"x\ufffdy", "\u00e9\ufffd"}); fmt.Sprint(got.Both) != want {
		t.Errorf(`stdout x\377y and stderr \303\251\376: %q, want %q`, got.Both, want)
	}
}
