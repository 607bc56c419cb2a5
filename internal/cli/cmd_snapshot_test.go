package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/client"
)

// TestServeSnapshotVerbs: msb snapshot create|ls|rm, msb fork and msb
// rollback against msb serve: what each prints, with and without --json,
// and the exit codes of a missing snapshot and of fork without a source.
func TestServeSnapshotVerbs(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "msb.sock")
	c, _ := client.New("unix://"+sock, "")
	defer c.Close()
	up := func() bool { _, err := c.Health(context.Background()); return err == nil }
	env := []string{"MSB_SOCKET=unix://" + sock}
	t.Run("serve", func(t *testing.T) {
		startServe(t, up, env, "--listen", "unix://"+sock, "--idle-timeout", "1h")
		ok := func(args ...string) string {
			t.Helper()
			r := msb(t, dir, env, args...)
			if r.code != 0 {
				t.Fatalf("%v: %+v", args, r)
			}
			return r.stdout
		}
		id := strings.TrimSpace(ok("sandbox", "create", "--label", "job=snap"))
		ok("exec", id, "--", "echo 1 > /step1")
		if got := ok("snapshot", "create", id, "cli-step1"); got != "cli-step1\n" {
			t.Fatalf("snapshot create printed %q", got)
		}
		var info api.SnapshotInfo
		if err := json.Unmarshal([]byte(ok("--json", "snapshot", "create", id, "cli-json")), &info); err != nil || info.Name != "cli-json" || info.Sandbox != id || info.Layer == "" {
			t.Fatalf("snapshot create --json: %v %+v", err, info)
		}
		if got := ok("snapshot", "ls"); !strings.Contains(got, "cli-step1") || !strings.Contains(got, id) {
			t.Fatalf("snapshot ls: %q", got)
		}
		var list api.SnapshotList
		if err := json.Unmarshal([]byte(ok("--json", "snapshot", "ls")), &list); err != nil || len(list.Snapshots) != 2 {
			t.Fatalf("snapshot ls --json: %v %+v", err, list)
		}

		ok("exec", id, "--", "echo 2 > /step2")
		kids := strings.Fields(ok("fork", id, "--count", "2", "--label", "branch=b"))
		if len(kids) != 2 {
			t.Fatalf("fork printed %q", kids)
		}
		for _, k := range kids {
			if got := ok("exec", k, "--", "cat /step1 /step2"); got != "1\n2\n" {
				t.Fatalf("child %s: %q", k, got)
			}
		}
		var forked api.SandboxList
		if err := json.Unmarshal([]byte(ok("--json", "fork", "--snapshot", "cli-step1")), &forked); err != nil || len(forked.Sandboxes) != 1 {
			t.Fatalf("fork --snapshot --json: %v %+v", err, forked)
		}
		if got := ok("exec", forked.Sandboxes[0].ID, "--", "cat /step1; test -e /step2 || echo none"); got != "1\nnone\n" {
			t.Fatalf("fork of cli-step1: %q", got)
		}

		if got := ok("rollback", id, "--snapshot", "cli-step1"); got != id+"\n" {
			t.Fatalf("rollback printed %q", got)
		}
		if got := ok("exec", id, "--", "cat /step1; test -e /step2 || echo none"); got != "1\nnone\n" {
			t.Fatalf("after rollback: %q", got)
		}
		ok("rollback", id)
		if got := ok("exec", id, "--", "test -e /step1 || echo none"); got != "none\n" {
			t.Fatalf("after rollback to the start: %q", got)
		}

		if got := ok("snapshot", "rm", "cli-step1", "cli-json"); got != "cli-step1\ncli-json\n" {
			t.Fatalf("snapshot rm printed %q", got)
		}
		if r := msb(t, dir, env, "snapshot", "rm", "cli-step1"); r.code != exitUsage || !strings.Contains(r.stderr, "cli-step1") {
			t.Fatalf("snapshot rm of a missing one: %+v", r)
		}
		if r := msb(t, dir, env, "fork"); r.code != exitUsage || !strings.Contains(r.stderr, "--snapshot") {
			t.Fatalf("fork without a source: %+v", r)
		}
		// Left open on purpose: SIGTERM must close the sandboxes.
	})
}
