package server

import (
	"archive/tar"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
)

// bashLayer is the host's bash and the libraries ldd names, at the paths
// ldd gives: enough for a sandbox's shell, and nothing else of the host.
func bashLayer(t *testing.T) []demotest.Entry {
	t.Helper()
	out, err := exec.Command("ldd", "/bin/bash").Output()
	if err != nil {
		privtest.Skip(t, "ldd /bin/bash: %v", err)
	}
	files := []string{"/bin/bash"}
	for _, m := range regexp.MustCompile(`(/\S+) \(0x`).FindAllStringSubmatch(string(out), -1) {
		files = append(files, m[1])
	}
	var ents []demotest.Entry
	dirs := map[string]bool{}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(f, "/")
		for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
		ents = append(ents, demotest.Entry{Name: rel, Body: string(body), Type: tar.TypeReg, Mode: 0o755})
	}
	var dirEnts []demotest.Entry
	for d := range dirs {
		dirEnts = append(dirEnts, demotest.Dir(d+"/"))
	}
	// Parents before children: shorter paths first.
	for i := range dirEnts {
		for j := i + 1; j < len(dirEnts); j++ {
			if len(dirEnts[j].Name) < len(dirEnts[i].Name) {
				dirEnts[i], dirEnts[j] = dirEnts[j], dirEnts[i]
			}
		}
	}
	return append(dirEnts, ents...)
}

// importTestImage imports into the daemon's cache a two-layer image: the
// host's bash, then /etc/marker, /work (owned by user when that is
// "uid:gid") and /hostroot, a symlink to /. Its config sets PATH,
// IMG_VAR, the working directory /work and user.
func importTestImage(t *testing.T, d *daemon, tag, user string) {
	t.Helper()
	work := demotest.Dir("work/")
	if u, g, ok := strings.Cut(user, ":"); ok {
		var err error
		if work.UID, err = strconv.Atoi(u); err != nil {
			t.Fatal(err)
		}
		if work.GID, err = strconv.Atoi(g); err != nil {
			t.Fatal(err)
		}
	}
	top := []demotest.Entry{demotest.Dir("etc/"), demotest.File("etc/marker", "from the image"),
		work, demotest.Symlink("hostroot", "/")}
	img, err := mutate.AppendLayers(empty.Image, demotest.EntriesLayer(t, bashLayer(t)), demotest.EntriesLayer(t, top))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config = v1.Config{Env: []string{"PATH=/bin", "IMG_VAR=from-image", "KEEP=kept"}, WorkingDir: "/work", User: user}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	tg, err := name.NewTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "image.tar")
	if err := tarball.WriteToFile(f, tg, img); err != nil {
		t.Fatal(err)
	}
	if _, err := d.e.Cache().ImportImage(context.Background(), "docker-archive:"+f, engine.ImageOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestServerImage: POST /v1/sandboxes with image runs a raw sandbox on an
// imported image alone (no host base): exec sees the image's files, its
// Env before the request's and its WorkingDir; the image's symlink to /
// reaches the sandbox's root, not the host's; the image's User applies,
// and to a sandbox created on a snapshot of that one (snapshot/<name>),
// which reads the user's private file; an image the cache lacks is
// not_found.
func TestServerImage(t *testing.T) {
	d := startDaemon(t, nil, nil)
	ctx := context.Background()
	c := d.unix
	importTestImage(t, d, "example.com/test/bash:1", "")
	info, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Image: "example.com/test/bash:1", Env: []string{"IMG_VAR=given"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSandbox(ctx, info.ID)
	res, err := c.Exec(ctx, info.ID, api.ExecRequest{Command: `echo "$PWD|$IMG_VAR|$KEEP|$(< /etc/marker)"`})
	if err != nil || res.ExitCode != 0 || res.Stdout != "/work|given|kept|from the image\n" {
		t.Fatalf("exec on the image: %v %+v", err, res)
	}

	if err := c.OpenSession(ctx, info.ID, api.SessionRequest{Name: "main"}); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Exec(ctx, info.ID, api.ExecRequest{Session: "main", Command: `cd /etc; echo "$PWD $IMG_VAR"`}); err != nil || res.Stdout != "/etc given\n" {
		t.Fatalf("session on the image: %v %+v", err, res)
	}

	// The host's files are nowhere: not as the host base, not through
	// the image's symlink to /, which ends at the sandbox's own root.
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	probe := `for p in /usr/bin/apt /hostroot/usr/bin/apt "$S" "/hostroot$S"; do [ -e "$p" ] && echo "sees $p"; done; echo "$(< /hostroot/etc/marker)"`
	res, err = c.Exec(ctx, info.ID, api.ExecRequest{Command: probe, Env: []string{"S=" + secret}})
	if err != nil || res.Stdout != "from the image\n" {
		t.Fatalf("escape probe: %v %+v", err, res)
	}
	if _, err := os.Stat("/usr/bin/apt"); err != nil {
		t.Fatalf("the probe needs the host's /usr/bin/apt: %v", err)
	}

	// The image's user, rootless too (through the caller's subordinate ids).
	importTestImage(t, d, "example.com/test/bash:user", "1234:4321")
	info2, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Image: "image/example.com/test/bash:user"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSandbox(ctx, info2.ID)
	const want = "1234:4321\n"
	if res, err := c.Exec(ctx, info2.ID, api.ExecRequest{Command: `echo "$UID:$GROUPS"`}); err != nil || res.Stdout != want {
		t.Fatalf("user: %v %+v, want %q", err, res, want)
	}

	// A sandbox on a snapshot of it runs as its user, where it worked.
	const self = `echo "$UID:$GROUPS $PWD $HOME"`
	before := sh(t, c, info2.ID, self+"; umask 077 && echo secret > key")
	snap := "image-user-" + info2.ID
	if _, err := c.Snapshot(ctx, info2.ID, api.SnapshotRequest{Name: snap}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteSnapshot(context.Background(), snap) })
	info3, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Image: "snapshot/" + snap})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSandbox(ctx, info3.ID)
	got := sh(t, c, info3.ID, self+`; test -O key && test -G key && echo "$(< key)" && echo more >> key`)
	if !strings.HasPrefix(before, "1234:4321 /work ") || got != before+"secret\n" {
		t.Fatalf("a sandbox on the snapshot: %q, want %q then the user's key", got, before)
	}

	_, err = c.CreateSandbox(ctx, api.CreateSandboxRequest{Image: "example.com/test/nosuch:1"})
	wantCode(t, err, api.CodeNotFound)
	if !strings.Contains(err.Error(), "example.com/test/nosuch:1") {
		t.Fatalf("the error does not name the image: %v", err)
	}
	_, err = c.CreateSandbox(ctx, api.CreateSandboxRequest{Image: "example.com/test/bash:1", HostBase: true})
	wantCode(t, err, api.CodeBadRequest)
}
