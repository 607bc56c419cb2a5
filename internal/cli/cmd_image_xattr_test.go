package cli

import (
	"archive/tar"
	"bytes"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/minisandbox/msb/internal/privtest"
)

// xattrProbe is a static program that prints a file's security.capability
// (hex) and user.mime: the image has neither getcap nor getfattr.
const xattrProbe = `package main

import (
	"encoding/hex"
	"fmt"
	"os"
	"syscall"
)

func get(p, name string) string {
	buf := make([]byte, 256)
	n, err := syscall.Getxattr(p, name, buf)
	if err != nil {
		return "none"
	}
	return string(buf[:n])
}

func main() {
	c := get(os.Args[1], "security.capability")
	if c != "none" {
		c = hex.EncodeToString([]byte(c))
	}
	fmt.Printf("cap=%s mime=%s\n", c, get(os.Args[1], "user.mime"))
}
`

// capBindService is setcap cap_net_bind_service=+ep's attribute value.
var capBindService = []byte{0x01, 0x00, 0x00, 0x02, 0x00, 0x04, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

// TestRunOnImageXattrs: an image file with a file capability and a
// user.* attribute has them inside a sandbox run on the image (read by a
// probe in the sandbox, through the sandbox's own root): both, as root
// and in a rootless sandbox, whose store sets the capability for the
// caller's user namespaces (TestRunOnImageXattrsRootless).
func TestRunOnImageXattrs(t *testing.T) {
	probe := probeBinary(t)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "bin/probe", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(probe))},
		{Name: "bin/capped", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(probe)), Format: tar.FormatPAX,
			PAXRecords: map[string]string{"SCHILY.xattr.security.capability": string(capBindService), "SCHILY.xattr.user.mime": "application/x-test"}},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(probe[:h.Size])
	}
	tw.Close()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("example.com/test/caps:1")
	archive := filepath.Join(t.TempDir(), "caps.tar")
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		t.Fatal(err)
	}
	env := []string{"MSB_CACHE=" + filepath.Join(t.TempDir(), "cache")}
	dir := t.TempDir()
	if r := msb(t, dir, env, "cache", "import-image", "docker-archive:"+archive); r.code != 0 {
		t.Fatalf("import-image: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	want := "cap=" + hex.EncodeToString(capBindService) + " mime=application/x-test\n"
	r := msb(t, dir, env, "run", "--image", "example.com/test/caps:1", "--", "/bin/probe", "/bin/capped")
	if r.code != 0 || r.stdout != want {
		t.Fatalf("probe in the sandbox: %d %q, want %q\n%s", r.code, r.stdout, want, r.stderr)
	}
	if r := msb(t, dir, env, "run", "--image", "example.com/test/caps:1", "--", "/bin/probe", "/bin/probe"); r.stdout != "cap=none mime=none\n" {
		t.Fatalf("the same bytes without attributes: %q %s", r.stdout, r.stderr)
	}
	if r := msb(t, dir, env, "cache", "verify"); r.code != 0 {
		t.Fatalf("cache verify: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestRunOnImageXattrsRootless is TestRunOnImageXattrs as an unprivileged
// user, with the probe the root run builds: the user's go has no build
// cache (make test makes the user afresh), and compiling the standard
// library for it was nearly all of the rerun's time.
func TestRunOnImageXattrsRootless(t *testing.T) {
	probe := buildProbe(t)
	for _, d := range []string{filepath.Dir(filepath.Dir(probe)), filepath.Dir(probe)} {
		os.Chmod(d, 0o755)
	}
	privtest.UnprivilegedEnv(t, "^TestRunOnImageXattrs$", xattrProbeEnv+"="+probe)
}

// xattrProbeEnv names, in TestRunOnImageXattrsRootless's rerun, the probe
// the root run built.
const xattrProbeEnv = "MSB_TEST_XATTR_PROBE"

// probeBinary is the probe's bytes: the root run's in the rootless rerun,
// else built here.
func probeBinary(t *testing.T) []byte {
	t.Helper()
	p := os.Getenv(xattrProbeEnv)
	if p == "" {
		p = buildProbe(t)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// buildProbe compiles xattrProbe as a static binary and returns its path.
func buildProbe(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		privtest.Skip(t, "no go toolchain to build the probe: %v", err)
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(xattrProbe), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(src, "probe")
	cmd := exec.Command(goBin, "build", "-o", out, "main.go")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=off", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, strings.TrimSpace(string(b)))
	}
	return out
}
