package cli

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/client"
)

// TestSandboxCreateWarm: msb sandbox create --count makes that many
// sandboxes in one call (ids one a line, or a list with --json), --warm
// has the daemon keep sandboxes of the image started ahead that the next
// creates take, and msb fork --snapshot --warm does the same for a
// snapshot's children; the daemon's metrics count the hits. A count below
// 1, or --warm on a fork of a live sandbox, is a usage error.
func TestSandboxCreateWarm(t *testing.T) {
	dir := t.TempDir()
	archive := busyboxImage(t, "example.com/test/busybox:warm", "one\n")
	sock := filepath.Join(dir, "msb.sock")
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("warm-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	env := []string{"MSB_CACHE=" + filepath.Join(dir, "cache"), "MSB_SOCKET=unix://" + sock}
	if r := msb(t, dir, env, "cache", "import-image", "docker-archive:"+archive); r.code != 0 {
		t.Fatalf("import-image: %+v", r)
	}
	c, _ := client.New("unix://"+sock, "")
	defer c.Close()
	up := func() bool { _, err := c.Health(context.Background()); return err == nil }
	t.Run("serve", func(t *testing.T) {
		startServe(t, up, env, "--listen", "unix://"+sock, "--listen", addr, "--token-file", tokenFile, "--spares", "4")
		var ids []string
		defer func() {
			if len(ids) > 0 {
				msb(t, dir, env, append([]string{"sandbox", "rm"}, ids...)...)
			}
		}()
		ok := func(args ...string) string {
			t.Helper()
			r := msb(t, dir, env, args...)
			if r.code != 0 {
				t.Fatalf("%v: %+v", args, r)
			}
			return r.stdout
		}
		made := strings.Fields(ok("sandbox", "create", "--image", "example.com/test/busybox:warm", "--count", "2", "--warm", "2", "--label", "g=w"))
		ids = append(ids, made...)
		if len(made) != 2 || made[0] == made[1] {
			t.Fatalf("create --count 2 printed %q", made)
		}
		waitMetric(t, addr, `msb_pool_spares{kind="image",state="ready"} 2`)
		var list api.SandboxList
		if err := json.Unmarshal([]byte(ok("--json", "sandbox", "create", "--image", "example.com/test/busybox:warm", "--count", "2")), &list); err != nil || len(list.Sandboxes) != 2 {
			t.Fatalf("create --count 2 --json: %v %+v", err, list)
		}
		for _, s := range list.Sandboxes {
			ids = append(ids, s.ID)
		}
		waitMetric(t, addr, `msb_pool_total{event="hit",kind="image"} 2`)

		step := filepath.Join(dir, "step")
		if err := os.WriteFile(step, []byte("1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ok("cp", step, made[0]+":/work/step") // the image has no bash for exec
		ok("snapshot", "create", made[0], "cli-warm")
		defer msb(t, dir, env, "snapshot", "rm", "cli-warm")
		ids = append(ids, strings.Fields(ok("fork", "--snapshot", "cli-warm", "--warm", "2"))...)
		waitMetric(t, addr, `msb_pool_spares{kind="snapshot",state="ready"} 2`)
		kids := strings.Fields(ok("fork", "--snapshot", "cli-warm", "--count", "2"))
		ids = append(ids, kids...)
		if len(kids) != 2 {
			t.Fatalf("fork --count 2 printed %q", kids)
		}
		back := filepath.Join(dir, "back")
		ok("cp", kids[1]+":/work/step", back)
		if b, err := os.ReadFile(back); err != nil || string(b) != "1\n" {
			t.Fatalf("a child's /work/step: %v %q", err, b)
		}
		waitMetric(t, addr, `msb_pool_total{event="hit",kind="snapshot"} 2`)

		for _, args := range [][]string{{"sandbox", "create", "--count", "0"}, {"sandbox", "create", "--warm", "-1"}, {"fork", made[0], "--warm", "2"}} {
			if r := msb(t, dir, env, args...); r.code != exitUsage {
				t.Errorf("%v: %+v, want exit %d", args, r, exitUsage)
			}
		}
	})
}

// freeAddr is a loopback address with a port free now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitMetric scrapes the daemon's /metrics at addr until it has the line
// want (the pool works in the background), failing after a minute.
func waitMetric(t *testing.T, addr, want string) {
	t.Helper()
	var last string
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer warm-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		var b strings.Builder
		_, err = io.Copy(&b, resp.Body)
		resp.Body.Close()
		if last = b.String(); err == nil && strings.Contains(last, want+"\n") {
			return
		}
	}
	t.Fatalf("the metrics never showed %q:\n%s", want, last)
}
