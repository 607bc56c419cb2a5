package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/minisandbox/msb/internal/server/e2b/envd/filesystem"
	"github.com/minisandbox/msb/internal/server/e2b/envd/filesystem/filesystemconnect"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process/processconnect"
)

// envdClient is a created sandbox's id and the headers its envd wants.
type envdClient struct {
	url, id, token string
	fs             filesystemconnect.FilesystemClient
}

// createSandbox creates a base sandbox through the REST API.
func createSandbox(t *testing.T, url string) envdClient {
	t.Helper()
	status, created := call(t, "POST", url+"/v2/sandboxes", map[string]string{"X-API-Key": testKey})
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, created)
	}
	return envdClient{url: url, id: created["sandboxID"].(string), token: created["envdAccessToken"].(string),
		fs: filesystemconnect.NewFilesystemClient(http.DefaultClient, url)}
}

// req is msg with the sandbox's routing and access headers.
func req[T any](c envdClient, msg *T) *connect.Request[T] {
	r := connect.NewRequest(msg)
	r.Header().Set("E2b-Sandbox-Id", c.id)
	r.Header().Set("X-Access-Token", c.token)
	return r
}

// sh runs a command in the sandbox and fails the test unless it exits 0.
func (c envdClient) sh(t *testing.T, cmd string) {
	t.Helper()
	pc := processconnect.NewProcessClient(http.DefaultClient, c.url)
	s, err := pc.Start(context.Background(), req(c, &process.StartRequest{Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", cmd}}}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for s.Receive() {
		if end := s.Msg().GetEvent().GetEnd(); end != nil {
			if end.GetExitCode() != 0 {
				t.Fatalf("%s: exit %d %s", cmd, end.GetExitCode(), end.GetError())
			}
			return
		}
	}
	t.Fatalf("%s: the stream ended without an end event: %v", cmd, s.Err())
}

// inotifyFds counts this process's inotify instances: the front end runs
// in it.
func inotifyFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); l == "anon_inode:inotify" {
			n++
		}
	}
	return n
}

// TestE2BWatchDir drives watchers through the e2b SDK, sync (CreateWatcher
// and GetWatcherEvents) and async (the WatchDir stream): E2B's event types,
// recursive or not, a missing directory.
func TestE2BWatchDir(t *testing.T) {
	out := sdkScript(t, "sdk_watch.py")
	var got struct {
		Recursive [][2]string `json:"recursive"`
		Flat      [][2]string `json:"flat"`
		Missing   string      `json:"missing"`
		Async     [][2]string `json:"async"`
		AsyncExit []bool      `json:"async_exit"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	wantIn := func(what string, seen, want [][2]string) {
		t.Helper()
		i := 0
		for _, e := range seen {
			if i < len(want) && e == want[i] {
				i++
			}
		}
		if i < len(want) {
			t.Errorf("%s saw %v: missing %v (in this order: %v)", what, seen, want[i], want)
		}
	}
	wantIn("a recursive watch", got.Recursive, [][2]string{{"a.txt", "create"}, {"a.txt", "write"}, {"a.txt", "chmod"},
		{"sub", "create"}, {"sub/b.txt", "create"}, {"sub/b.txt", "write"}, {"a.txt", "rename"}, {"c.txt", "create"},
		{"c.txt", "remove"}, {"end", "create"}})
	wantIn("a flat watch", got.Flat, [][2]string{{"a.txt", "create"}, {"sub", "create"}, {"end", "create"}})
	for _, e := range got.Flat {
		if strings.HasPrefix(e[0], "sub/") {
			t.Errorf("a watch that is not recursive saw %v inside a subdirectory", e)
		}
	}
	if got.Missing != "FileNotFoundException" {
		t.Errorf("watch_dir of a missing directory raised %q, want FileNotFoundException (a NotFoundException)", got.Missing)
	}
	wantIn("an async watch", got.Async, [][2]string{{"x.txt", "create"}, {"d", "create"}, {"x.txt", "remove"}})
	if fmt.Sprint(got.AsyncExit) != "[true]" {
		t.Errorf("on_exit after stop(): %v, want called once without an error", got.AsyncExit)
	}
}

// TestE2BWatchStaysInSandbox: a symlink in the sandbox to a host directory
// is resolved inside the sandbox's root, so a watch through it never sees
// the host's directory.
func TestE2BWatchStaysInSandbox(t *testing.T) {
	url := startFront(t)
	c := createSandbox(t, url)
	host := t.TempDir()
	c.sh(t, fmt.Sprintf("test ! -e %[1]s && ln -s %[1]s /tmp/esc", host))
	_, err := c.fs.CreateWatcher(context.Background(), req(c, &filesystem.CreateWatcherRequest{Path: "/tmp/esc"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("watching a symlink to host directory %s that the sandbox does not have: %v, want not_found", host, err)
	}
}

// TestE2BWatchEndsWithSandbox: killing a sandbox ends its watch streams
// and releases every watcher's inotify instance.
func TestE2BWatchEndsWithSandbox(t *testing.T) {
	url := startFront(t)
	before := inotifyFds(t)
	c := createSandbox(t, url)
	if _, err := c.fs.CreateWatcher(context.Background(), req(c, &filesystem.CreateWatcherRequest{Path: "/tmp", Recursive: true})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.fs.WatchDir(ctx, req(c, &filesystem.WatchDirRequest{Path: "/tmp"}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Receive() || s.Msg().GetStart() == nil {
		t.Fatalf("the first message of WatchDir is %v (%v), want a start event", s.Msg(), s.Err())
	}
	if n := inotifyFds(t) - before; n != 2 {
		t.Errorf("%d inotify instances for two watchers", n)
	}
	if status, body := call(t, "DELETE", url+"/sandboxes/"+c.id, map[string]string{"X-API-Key": testKey}); status != http.StatusNoContent {
		t.Fatalf("kill: %d %v", status, body)
	}
	for s.Receive() {
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the watch stream was still open a minute after its sandbox was killed")
	}
	if n := inotifyFds(t) - before; n != 0 {
		t.Errorf("%d inotify instances left after the sandbox was killed", n)
	}
}
