package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
)

// TestE2BShutdownPause: a daemon that stops pauses its running sandboxes
// (PauseAtShutdown, msb serve's --e2b-shutdown-pause): a new daemon on the
// same cache lists them paused with their metadata, lifecycle and the rest
// of their timeout, get_info says what the pause kept (pauseMode full
// where it kept their processes: pauseSnapshot); connect
// (through the SDK) gives the sandbox back with its file, envs, user and
// network rules but not its background process, and an envd call resumes
// the others, with auto_resume or without (their clients never paused
// them). Root and rootless (TestE2BRootlessSDK).
func TestE2BShutdownPause(t *testing.T) {
	t.Setenv("MSB_TEST_OPEN_PORT", strconv.Itoa(privtest.ServeOK(t)))
	t.Setenv("MSB_TEST_CLOSED_PORT", strconv.Itoa(privtest.ServeOK(t)))
	state, cache := privtest.StateDir(t), filepath.Join(t.TempDir(), "cache")

	first := startDaemonPausing(t, state, cache, 2*time.Minute) // a bound on a stuck pause, not a speed
	out := sdkScriptAt(t, first.url, "sdk_shutdown.py", "before")
	if err := first.stop(); err != nil {
		t.Fatalf("stopping the first daemon: %v", err)
	}
	var before struct {
		Plain, Auto, Idle, User string
		Processes               int
	}
	if err := json.Unmarshal(out, &before); err != nil || before.Plain == "" || before.Processes != 1 {
		t.Fatalf("the SDK script printed %q (%v), want three sandboxes and one process", out, err)
	}
	recs, err := (&records{dir: stateDir(cache)}).load(kindPaused)
	if err != nil || len(recs) != 3 {
		t.Fatalf("%d paused records after the shutdown (%v), want 3", len(recs), err)
	}
	for id, r := range recs {
		if r.Paused.ShutdownAt.IsZero() || r.Paused.Snapshot != pausePrefix+id {
			t.Errorf("the record of %s: %+v, want its pause snapshot and the shutdown's time", id, r.Paused)
		}
	}

	second := startDaemon(t, state, cache)
	defer func() {
		if err := second.stop(); err != nil {
			t.Errorf("stopping the second daemon: %v", err)
		}
	}()
	tokens := map[string]string{}
	for _, id := range []string{before.Auto, before.Idle} {
		status, body := send(t, "GET", second.url+"/sandboxes/"+id, "", nil)
		var got struct {
			State     string `json:"state"`
			PauseMode string `json:"pauseMode"`
			MsbPause  string `json:"msbPause"`
			Token     string `json:"envdAccessToken"`
		}
		json.Unmarshal([]byte(body), &got)
		want := "filesystem"
		if got.MsbPause == pauseProcesses {
			want = "full"
		}
		if status != http.StatusOK || got.State != "paused" || got.PauseMode != want || got.MsbPause == "" {
			t.Errorf("get %s after the restart: %d %s, want it paused, pauseMode %s, msbPause saying what it kept", id, status, body, want)
		}
		tokens[id] = got.Token
	}

	out = sdkScriptAt(t, second.url, "sdk_shutdown.py", "after", before.Plain)
	var got struct {
		Listed    [][]string `json:"listed"`
		Info      []any      `json:"info"`
		Note      string     `json:"note"`
		Env       string     `json:"env"`
		User      string     `json:"user"`
		Processes int        `json:"processes"`
		Allowed   string     `json:"allowed"`
		Denied    string     `json:"denied"`
		State     string     `json:"state"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	if fmt.Sprint(got.Listed) != "[[s1 paused] [s2 paused] [s3 paused]]" {
		t.Errorf("Sandbox.list(state paused) after the restart: %v, want the three sandboxes by their metadata", got.Listed)
	}
	if fmt.Sprint(got.Info) != "[paused map[auto_resume:false on_timeout:kill] true]" {
		t.Errorf("get_info of the plain sandbox after the restart: %v, want paused, its lifecycle, an end within its 600 s timeout", got.Info)
	}
	if got.Note != "written before the shutdown" || got.Env != "t1\n" || got.User != before.User || got.State != "running" {
		t.Errorf("after connect: file %q, $TRAINER %q, user %q (before %q), state %q; want the file, t1, the same user, running",
			got.Note, got.Env, got.User, before.User, got.State)
	}
	if got.Processes != 0 {
		t.Errorf("after connect commands.list has %d processes, want none: processes do not outlive the daemon", got.Processes)
	}
	if got.Allowed != "ok" || !strings.Contains(got.Denied, "refused") {
		t.Errorf("after connect the allowed port said %q, the denied one %q: its network rules were not given again", got.Allowed, got.Denied)
	}
	for id, want := range map[string]string{before.Auto: "kept by s2", before.Idle: "kept by s3"} {
		envd := map[string]string{"E2b-Sandbox-Id": id, "X-Access-Token": tokens[id]}
		if status, body := send(t, "GET", second.url+"/files?path=/root/kept.txt", "", envd); status != http.StatusOK || body != want {
			t.Errorf("an envd read of %s after the restart: %d %q, want it resumed and %q", id, status, body, want)
		}
		if status, body := send(t, "DELETE", second.url+"/sandboxes/"+id, "", nil); status != http.StatusNoContent {
			t.Errorf("kill %s: %d %s", id, status, body)
		}
	}
	if recs, err := (&records{dir: stateDir(cache)}).load(kindPaused); err != nil || len(recs) != 0 {
		t.Errorf("%d paused records after the resumes and kills (%v), want none", len(recs), err)
	}
}

// TestE2BShutdownPauseTimeout: in the next daemon the timeout of a
// sandbox paused at a shutdown runs out the rest it had: one killed at its
// timeout is killed (its snapshot and record gone), one paused at its
// timeout stays paused as a pause asked for, which an envd call no longer
// resumes. The records say 1 s was left at the shutdown. No SDK: it runs
// rootless too.
func TestE2BShutdownPauseTimeout(t *testing.T) {
	state, cache := privtest.StateDir(t), filepath.Join(t.TempDir(), "cache")
	first := startDaemonPausing(t, state, cache, 2*time.Minute)
	ids := map[string]string{}
	for name, body := range map[string]string{"kill": `{"timeout": 3600}`, "pause": `{"timeout": 3600, "autoPause": true}`} {
		status, resp := send(t, "POST", first.url+"/v2/sandboxes", body, nil)
		var created struct {
			ID string `json:"sandboxID"`
		}
		json.Unmarshal([]byte(resp), &created)
		if status != http.StatusCreated {
			first.stop()
			t.Fatalf("create: %d %s", status, resp)
		}
		ids[name] = created.ID
	}
	if err := first.stop(); err != nil {
		t.Fatalf("stopping the first daemon: %v", err)
	}
	rec := &records{dir: stateDir(cache)}
	recs, err := rec.load(kindPaused)
	if err != nil || len(recs) != 2 {
		t.Fatalf("%d paused records after the shutdown (%v), want 2", len(recs), err)
	}
	for id, r := range recs {
		p := r.Paused
		p.End = p.ShutdownAt.Add(time.Second)
		if err := rec.put(kindPaused, id, func() record { return record{Paused: p} }); err != nil {
			t.Fatal(err)
		}
	}

	second := startDaemon(t, state, cache)
	defer func() {
		if err := second.stop(); err != nil {
			t.Errorf("stopping the second daemon: %v", err)
		}
	}()
	if got := waitState(t, second.url, ids["kill"], "gone"); got != "gone" {
		t.Errorf("a sandbox paused at the shutdown with 1 s of its timeout left is %q a minute after the restart, want killed", got)
	}
	// Read the record as the daemon leaves it: load would remove the
	// temp file of a write the daemon is making.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		r, err := readRecord(rec.path(kindPaused, ids["pause"]), kindPaused, ids["pause"])
		if err == nil && r.Paused.ShutdownAt.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the restart the on_timeout pause sandbox's record is %+v (%v), want it paused as a pause asked for", r.Paused, err)
		}
	}
	if _, err := os.Stat(rec.path(kindPaused, ids["kill"])); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the record of the sandbox killed at its timeout: %v, want it removed", err)
	}
	status, body := send(t, "GET", second.url+"/sandboxes/"+ids["pause"], "", nil)
	var info struct {
		State string `json:"state"`
		Token string `json:"envdAccessToken"`
	}
	json.Unmarshal([]byte(body), &info)
	if status != http.StatusOK || info.State != "paused" {
		t.Fatalf("get of the on_timeout pause sandbox: %d %s, want paused", status, body)
	}
	envd := map[string]string{"E2b-Sandbox-Id": ids["pause"], "X-Access-Token": info.Token}
	if status, body := send(t, "GET", second.url+"/files?path=/etc/hostname", "", envd); status != http.StatusBadGateway {
		t.Errorf("an envd call to a sandbox paused at its timeout (no auto_resume): %d %s, want the 502 of a sandbox not running", status, body)
	}
	if status, body := send(t, "DELETE", second.url+"/sandboxes/"+ids["pause"], "", nil); status != http.StatusNoContent {
		t.Errorf("kill: %d %s", status, body)
	}
}

// TestE2BShutdownPauseOutOfTime: a shutdown whose time runs out before
// it pauses a sandbox names it in its error and records nothing of it:
// no paused record, no pause snapshot.
func TestE2BShutdownPauseOutOfTime(t *testing.T) {
	state, cache := privtest.StateDir(t), filepath.Join(t.TempDir(), "cache")
	first := startDaemonPausing(t, state, cache, time.Nanosecond)
	status, resp := send(t, "POST", first.url+"/v2/sandboxes", `{"timeout": 3600}`, nil)
	var created struct {
		ID string `json:"sandboxID"`
	}
	json.Unmarshal([]byte(resp), &created)
	if status != http.StatusCreated {
		first.stop()
		t.Fatalf("create: %d %s", status, resp)
	}
	err := first.stop()
	if err == nil || !strings.Contains(err.Error(), created.ID+": not started") || !strings.Contains(err.Error(), "--e2b-shutdown-pause") {
		t.Errorf("a shutdown with no time to pause: %v, want an error naming %s and the flag", err, created.ID)
	}
	if recs, err := (&records{dir: stateDir(cache)}).load(kindPaused); err != nil || len(recs) != 0 {
		t.Errorf("%d paused records (%v), want none", len(recs), err)
	}
	e, err := engine.Open(context.Background(), engine.Config{StateDir: state, Cache: engine.CacheConfig{Dir: cache}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	snaps, err := e.Snapshots()
	if err != nil || len(snaps) != 0 {
		t.Errorf("snapshots after the shutdown: %+v (%v), want none", snaps, err)
	}
}
