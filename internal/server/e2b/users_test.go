package e2b

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/engine"
)

// userImage is the reference of importUserImage's image.
const userImage = "example.com/msb-test/e2b-user:1"

// importUserImage imports into e's cache an image made of the host's
// bash, setpriv and coreutils, whose /etc/passwd has root and E2B's user
// `user` (1000, owning /home/user) but no USER: E2B's base, small.
func importUserImage(t *testing.T, e *engine.Engine) {
	t.Helper()
	var bins []string
	for _, tool := range []string{"setpriv", "id", "whoami", "stat", "chown", "mkdir", "mv", "rm", "cat", "ls", "touch", "sleep", "env", "grep", "cp", "chmod", "echo", "mkfifo", "script", "stty", "tty"} {
		bins = append(bins, "/usr/bin/"+tool)
	}
	root := demotest.HostRootfs(t, nil, bins...)
	for file, data := range map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/bash\n",
		"etc/group":  "root:x:0:\nuser:x:1000:\n",
	} {
		if err := os.WriteFile(filepath.Join(root, file), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "home", "user"), 0o755); err != nil {
		t.Fatal(err)
	}
	img := demotest.ImageOwned(t, root, func(rel string) (int, int) {
		if rel == "home/user" || strings.HasPrefix(rel, "home/user/") {
			return 1000, 1000
		}
		return 0, 0
	}, "HOME=/home/user")
	tag, err := name.NewTag(userImage)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "user.tar")
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Cache().ImportImage(context.Background(), "docker-archive:"+archive, engine.ImageOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestE2BUsers: on a base whose root has E2B's user (UseBase), commands
// and file calls act as `user` unless they name root, with that user's
// ids, groups, home and files, in sandboxes of its snapshots and forks
// too; a user the root lacks is the SDK's AuthenticationException; a
// template's USER is its sandboxes' user.
func TestE2BUsers(t *testing.T) {
	url, _ := startFrontWith(t, func(e *engine.Engine, f *Front) {
		importUserImage(t, e)
		if err := f.UseBase(context.Background(), userImage); err != nil {
			t.Fatal(err)
		}
	})
	out := sdkScriptAt(t, url, "sdk_users.py")
	t.Logf("%s", out)
	var got map[string]string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	want := map[string]string{
		"default":          "user 1000 1000 /home/user /home/user",
		"root":             "root 0 /root",
		"background":       "user",
		"write_owner":      "user:user",
		"made_dir_owner":   "user:user",
		"nested_dir_owner": "user:user",
		"root_write_owner": "root:root",
		"list_owner":       "user:user",
		"mkdir_owner":      "user:user",
		"denied":           "exit 1",
		"from_snapshot":    "user",
		"fork":             "user",
		"unknown_command":  "AuthenticationException: invalid username: 'ghost'",
		"unknown_read":     "AuthenticationException: invalid username: 'ghost'",
		"root_template":    "root",
		"user_template":    "user",
		"built_as":         "root",
	}
	for k, w := range want {
		if !strings.HasPrefix(got[k], w) {
			t.Errorf("%s: got %q, want %q", k, got[k], w)
		}
	}
}

// TestE2BBaseMode: UseBase takes a root with E2B's user in root mode, and
// refuses it in rootless mode, where a sandbox running as root maps no
// other user, saying so.
func TestE2BBaseMode(t *testing.T) {
	startFrontWith(t, func(e *engine.Engine, f *Front) {
		importUserImage(t, e)
		err := f.UseBase(context.Background(), userImage)
		switch {
		case e.Mode() == "root" && (err != nil || f.base != userImage || f.baseUser != e2bUser):
			t.Errorf("root mode: UseBase: %v; base %q, user %q", err, f.base, f.baseUser)
		case e.Mode() != "root" && (err == nil || !strings.Contains(err.Error(), "needs msb in root mode")):
			t.Errorf("%s mode: UseBase said %v, want the refusal", e.Mode(), err)
		}
		if err := f.UseBase(context.Background(), "example.com/msb-test/never:1"); err == nil || !strings.Contains(err.Error(), "E2B base") {
			t.Errorf("UseBase of a root the cache lacks said %v", err)
		}
	})
}

// TestUserLookups: /etc/passwd lookups by name and uid, and uid_map
// ranges.
func TestUserLookups(t *testing.T) {
	passwd := []byte("root:x:0:0:root:/root:/bin/bash\nbad:x:z:0::/:/bin/sh\nuser:x:1000:1001::/home/user:/bin/bash\n")
	for _, name := range []string{"user", "1000"} {
		u, ok := lookupPasswd(passwd, name)
		if !ok || *u != (sysUser{name: "user", uid: 1000, gid: 1001, home: "/home/user"}) {
			t.Errorf("lookup %q: %+v %v", name, u, ok)
		}
	}
	if _, ok := lookupPasswd(passwd, "bad"); ok {
		t.Error("a line with a bad uid was taken")
	}
	if _, ok := lookupPasswd(passwd, "ghost"); ok {
		t.Error("a missing user was found")
	}
	rootless := []byte("         0       1001          1\n")
	full := []byte("         0          0 4294967295\n")
	sub := []byte("0 1001 1\n1 100000 65536\n")
	for _, c := range []struct {
		m    []byte
		id   int
		want bool
	}{{rootless, 0, true}, {rootless, 1000, false}, {full, 1000, true}, {sub, 1000, true}, {sub, 65537, false}} {
		if got := idMapped(c.m, c.id); got != c.want {
			t.Errorf("idMapped(%q, %d) = %v", c.m, c.id, got)
		}
	}
}
