package rootfs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/minisandbox/msb/internal/privtest"
)

// startRegistry runs Debian's docker-registry (the distribution registry)
// on a free loopback port with its storage in a temp dir, and stops it
// after the test. It returns host:port.
func startRegistry(t *testing.T) string {
	t.Helper()
	return startRegistryAuth(t, "")
}

// startRegistryAuth is startRegistry with an auth section for the
// registry's configuration (YAML, indented under "auth:").
func startRegistryAuth(t *testing.T, auth string) string {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		privtest.Skip(t, "docker-registry not found (apt-get install docker-registry)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yml")
	conf := fmt.Sprintf("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n", filepath.Join(dir, "data"), addr)
	if auth != "" {
		conf += "auth:\n" + auth
	}
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfg)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for i := 0; ; i++ {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || auth != "" && resp.StatusCode == http.StatusUnauthorized {
				return addr
			}
		}
		if i == 200 {
			t.Fatalf("registry on %s did not answer: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestImportRegistry: an image pushed to a real registry on loopback
// imports over plain HTTP (allowed for loopback only) by tag, and a tag the
// registry lacks is ErrNoImage.
func TestImportRegistry(t *testing.T) {
	addr := startRegistry(t)
	img := buildImage(t, v1.Config{Env: []string{"FROM_REGISTRY=1"}}, baseLayer(), topLayer())
	tag, err := name.NewTag(addr+"/test/img:v1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, remote.WithContext(context.Background())); err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	imp, err := importSource(t, st, "docker://"+addr+"/test/img:v1", OpenOptions{Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	if imp.Record.Digest != want.String() {
		t.Fatalf("digest %s, want %s", imp.Record.Digest, want)
	}
	if !slices.Contains(imageRefs(t, st), "image/"+addr+"/test/img:v1") {
		t.Fatalf("refs %v", imageRefs(t, st))
	}
	root, rt := merged(t, st, "image/"+addr+"/test/img:v1")
	if !slices.Contains(rt.Config.Env, "FROM_REGISTRY=1") {
		t.Fatalf("env %v", rt.Config.Env)
	}
	if _, err := os.Stat(filepath.Join(root, "opaque/new")); err != nil {
		t.Fatal(err)
	}
	_, err = importSource(t, st, "docker://"+addr+"/test/img:nope", OpenOptions{Insecure: true})
	if !errors.Is(err, ErrNoImage) {
		t.Fatalf("missing tag: %v, want ErrNoImage", err)
	}
	mustVerify(t, st)
}
