package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
)

// daemon is one engine and its front end serving on loopback, as msb
// serve --e2b runs them: Restore, then Serve.
type daemon struct {
	url  string
	e    *engine.Engine
	stop func() error
}

// startDaemon opens an engine on state and cache, restores its front's
// records and serves it; stop shuts it down as a daemon stops.
func startDaemon(t *testing.T, state, cache string) daemon {
	t.Helper()
	return startDaemonPausing(t, state, cache, 0)
}

// startDaemonPausing is startDaemon whose stop first pauses the running
// sandboxes within pause (PauseAtShutdown; 0: none), as msb serve does.
func startDaemonPausing(t *testing.T, state, cache string, pause time.Duration) daemon {
	t.Helper()
	e, err := engine.Open(context.Background(), engine.Config{StateDir: state, Cache: engine.CacheConfig{Dir: cache}})
	if err != nil {
		t.Fatal(err)
	}
	front := New(e, testKey, nil)
	front.PauseAtShutdown(pause)
	if err := front.Restore(context.Background()); err != nil {
		e.Close()
		t.Fatalf("restoring the front's records: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- front.Serve(ctx, l) }()
	return daemon{url: "http://" + l.Addr().String(), e: e, stop: func() error {
		cancel()
		return errors.Join(<-done, e.Close())
	}}
}

// gc collects the cache's garbage between two daemons, as msb cache gc.
func gc(t *testing.T, state, cache string) {
	t.Helper()
	e, err := engine.Open(context.Background(), engine.Config{StateDir: state, Cache: engine.CacheConfig{Dir: cache}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.Cache().GC(context.Background()); err != nil {
		t.Fatalf("cache gc: %v", err)
	}
}

// TestE2BRestart: a template built and a sandbox paused through the SDK
// outlive the daemon and a cache gc: a new daemon on the same cache creates from the
// template by name and by tag, lists the paused sandbox with its
// metadata, and resumes it (connect) with the file written before, its
// envs and its network rules; kill removes its record. A snapshot
// create_snapshot took of a resumed sandbox is still listed under that
// sandbox's E2B id, and delete_snapshot removes its record.
func TestE2BRestart(t *testing.T) {
	t.Setenv("MSB_TEST_OPEN_PORT", strconv.Itoa(privtest.ServeOK(t)))
	t.Setenv("MSB_TEST_CLOSED_PORT", strconv.Itoa(privtest.ServeOK(t)))
	state, cache := privtest.StateDir(t), filepath.Join(t.TempDir(), "cache")

	first := startDaemon(t, state, cache)
	var before struct {
		Sandbox    string `json:"sandbox"`
		SnapshotOf string `json:"snapshot_of"`
	}
	out := sdkScriptAt(t, first.url, "sdk_restart.py", "before")
	if err := first.stop(); err != nil {
		t.Fatalf("stopping the first daemon: %v", err)
	}
	if err := json.Unmarshal(out, &before); err != nil || before.Sandbox == "" || before.SnapshotOf == "" {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	gc(t, state, cache)
	for _, kind := range []string{kindTemplate, kindPaused, kindSnapshot} {
		if ents, _ := os.ReadDir(filepath.Join(stateDir(cache), kind)); len(ents) != 1 {
			t.Errorf("%d %s records after the first daemon, want 1", len(ents), kind)
		}
	}

	second := startDaemon(t, state, cache)
	defer func() {
		if err := second.stop(); err != nil {
			t.Errorf("stopping the second daemon: %v", err)
		}
	}()
	out = sdkScriptAt(t, second.url, "sdk_restart.py", "after", before.Sandbox, before.SnapshotOf)
	var got struct {
		Exists    bool     `json:"exists"`
		Tags      []string `json:"tags"`
		Created   []string `json:"created"`
		Listed    []any    `json:"listed"`
		Note      string   `json:"note"`
		Env       string   `json:"env"`
		Allowed   string   `json:"allowed"`
		Denied    string   `json:"denied"`
		Again     string   `json:"again"`
		AfterKill []string `json:"after_kill"`
		Snapshots []string `json:"snapshots"`
		FromSnap  string   `json:"from_snapshot"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	if fmt.Sprint(got.Snapshots) != "[msb-restart-snap]" || got.FromSnap != "in the snapshot" {
		t.Errorf("after the restart list_snapshots(sandbox_id) of a resumed sandbox's snapshot: %v, a sandbox of it read %q; want [msb-restart-snap] and its file",
			got.Snapshots, got.FromSnap)
	}
	if !got.Exists || fmt.Sprint(got.Tags) != "[prod v1]" {
		t.Errorf("after the restart Template.exists is %v and get_tags %v, want true and [prod v1]", got.Exists, got.Tags)
	}
	if fmt.Sprint(got.Created) != "[from-build\nyes\n from-build\nyes\n]" {
		t.Errorf("sandboxes created by name and by name:prod printed %q, want the build's file and ENV twice", got.Created)
	}
	if fmt.Sprint(got.Listed) != "[[true map[run:r1] msb-restart]]" {
		t.Errorf("the paused sandboxes listed after the restart: %v, want it alone with its metadata and template", got.Listed)
	}
	if want := "written before the restart"; got.Note != want || got.Again != want {
		t.Errorf("the file written before the pause read %q after the restart's resume and %q after one more, want %q", got.Note, got.Again, want)
	}
	if got.Env != "yes\nt1\n" {
		t.Errorf("after the resume a command printed %q, want the file it wrote (the template's ENV) and its envs (t1)", got.Env)
	}
	if got.Allowed != "ok" || !strings.Contains(got.Denied, "refused") {
		t.Errorf("after the resume the allowed port said %q, the denied one %q: its network rules were not given again", got.Allowed, got.Denied)
	}
	if len(got.AfterKill) != 0 {
		t.Errorf("sandboxes listed after the kill: %v, want none", got.AfterKill)
	}
	for _, kind := range []string{kindPaused, kindSnapshot} {
		if ents, _ := os.ReadDir(filepath.Join(stateDir(cache), kind)); len(ents) != 0 {
			t.Errorf("%d %s records after the kill and delete_snapshot, want none", len(ents), kind)
		}
	}
}
