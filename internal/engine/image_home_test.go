package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/demo/demotest"
)

// TestImageUserHome: a sandbox on an image whose USER is not root and
// whose Env has no HOME gets the HOME podman gives it: the user's home in
// the image's /etc/passwd (which calc, owning it, writes to), else "/"
// (a uid without an entry, an entry without a home); the working directory
// stays "/" without a WORKDIR. The image's HOME, the request's, and
// root's /root are kept. A sandbox made on a snapshot of one has its HOME.
func TestImageUserHome(t *testing.T) {
	e := openEngine(t, "", nil)
	ctx := context.Background()
	root := demotest.HostRootfs(t, nil, "/usr/bin/id", "/usr/bin/mkdir", "/usr/bin/cat")
	if err := os.MkdirAll(filepath.Join(root, "home", "calc"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"passwd": "root:x:0:0::/root:/bin/bash\ncalc:x:1000:1000::/home/calc:/bin/bash\nnohome:x:1003:1003:::/bin/bash\n",
		"group":  "root:x:0:\ncalc:x:1000:\nstaff:x:50:\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(root, "etc", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := demotest.ImageOwned(t, root, func(rel string) (int, int) {
		if rel == "home/calc" || strings.HasPrefix(rel, "home/calc/") {
			return 1000, 1000
		}
		return 0, 0
	})
	image := func(user string, env ...string) string {
		t.Helper()
		img, err := mutate.Config(base, v1.Config{User: user, Env: append([]string{"PATH=/usr/bin:/bin"}, env...)})
		if err != nil {
			t.Fatal(err)
		}
		ref := "example.com/msb-test/engine-home:u" + strings.NewReplacer(":", "-").Replace(user) + "-" + map[bool]string{true: "env", false: "noenv"}[len(env) > 0]
		importImage(t, e, ref, img)
		return ref
	}
	const show = `echo "$(id -u):$(id -g) $PWD $HOME"`
	for _, c := range []struct {
		ref  string
		env  []string // the request's
		want string
	}{
		{image("calc"), nil, "1000:1000 / /home/calc"},
		{image("calc:staff"), nil, "1000:50 / /home/calc"},
		{image("1000"), nil, "1000:1000 / /home/calc"},
		{image("4242:50"), nil, "4242:50 / /"},
		{image("nohome"), nil, "1003:1003 / /"},
		{image("calc", "HOME=/srv"), nil, "1000:1000 / /srv"},
		{image("calc"), []string{"HOME=/tmp"}, "1000:1000 / /tmp"},
		{image(""), nil, "0:0 / /root"},
	} {
		sb, err := e.CreateSandbox(ctx, SandboxRequest{Image: c.ref, Env: c.env})
		if err != nil {
			t.Fatal(err)
		}
		got := sh(t, sb, "", show)
		sb.Close()
		if got != c.want+"\n" {
			t.Errorf("image %s, request env %q: %q, want %q", c.ref, c.env, got, c.want)
		}
	}

	// calc writes in its home; a sandbox on a snapshot keeps HOME.
	sb, err := e.CreateSandbox(ctx, SandboxRequest{Image: image("calc")})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	sh(t, sb, "", `mkdir -p "$HOME/.config" && echo x > "$HOME/.config/rc"`)
	name := "home-" + sb.ID()
	if _, err := e.Snapshot(ctx, sb.ID(), api.SnapshotRequest{Name: name}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.DeleteSnapshot(name) })
	made, err := e.CreateSandbox(ctx, SandboxRequest{Image: "snapshot/" + name})
	if err != nil {
		t.Fatal(err)
	}
	defer made.Close()
	res, err := made.Exec(ctx, api.ExecRequest{Command: show + `; test -O "$HOME/.config/rc" && cat "$HOME/.config/rc"`, TimeoutNs: int64(time.Minute)})
	if err != nil || res.ExitCode != 0 || res.Stdout != "1000:1000 / /home/calc\nx\n" {
		t.Fatalf("a sandbox on the snapshot: %v %+v, want calc with HOME /home/calc reading its file", err, res)
	}
}
