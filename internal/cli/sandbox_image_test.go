package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/client"
)

// TestSandboxCreateImage: msb sandbox create --image asks the daemon for a
// sandbox on an image its cache holds (the copied-out file is the image's,
// not the host's); an image the cache lacks exits 2 naming it.
func TestSandboxCreateImage(t *testing.T) {
	dir := t.TempDir()
	archive := busyboxImage(t, "example.com/test/busybox:create", "one\n")
	sock := filepath.Join(dir, "msb.sock")
	env := []string{"MSB_CACHE=" + filepath.Join(dir, "cache"), "MSB_SOCKET=unix://" + sock}
	if r := msb(t, dir, env, "cache", "import-image", "docker-archive:"+archive); r.code != 0 {
		t.Fatalf("import-image: %+v", r)
	}
	c, _ := client.New("unix://"+sock, "")
	defer c.Close()
	up := func() bool { _, err := c.Health(context.Background()); return err == nil }
	t.Run("serve", func(t *testing.T) {
		startServe(t, up, env, "--listen", "unix://"+sock)
		r := msb(t, dir, env, "sandbox", "create", "--image", "example.com/test/busybox:create")
		if r.code != 0 {
			t.Fatalf("create --image: %+v", r)
		}
		id := strings.TrimSpace(r.stdout)
		defer msb(t, dir, env, "sandbox", "rm", id)
		out := filepath.Join(dir, "hello")
		if r := msb(t, dir, env, "cp", id+":/etc/hello", out); r.code != 0 {
			t.Fatalf("cp: %+v", r)
		}
		if b, err := os.ReadFile(out); err != nil || string(b) != "hello from the image\n" {
			t.Fatalf("the sandbox's /etc/hello: %v %q", err, b)
		}
		r = msb(t, dir, env, "sandbox", "create", "--image", "example.com/test/nosuch:1")
		if r.code != exitUsage || !strings.Contains(r.stderr, "no such image") || !strings.Contains(r.stderr, "example.com/test/nosuch:1") {
			t.Fatalf("create on a missing image: %+v", r)
		}
	})
}
