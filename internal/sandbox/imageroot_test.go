package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// imageRoot is a root filesystem tree as an imported image gives one: the
// host's bash and the libraries it links, and the host's static busybox
// for the tools the probes run, nothing else of the host.
func imageRoot(t *testing.T) string {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		privtest.Skip(t, "no /bin/busybox (apt-get install busybox-static): %v", err)
	}
	root := filepath.Join(t.TempDir(), "root")
	put := func(rel string, data []byte, mode os.FileMode) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("ldd", "/usr/bin/bash").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{"/usr/bin/bash"}, strings.Fields(string(out))...) {
		if !strings.HasPrefix(f, "/") {
			continue
		}
		real, err := filepath.EvalSymlinks(f)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(real)
		if err != nil {
			t.Fatal(err)
		}
		put(strings.TrimPrefix(strings.Replace(f, "/lib", "/usr/lib", 1), "/usr/usr"), data, 0o755)
	}
	put("usr/bin/busybox", bb, 0o755)
	for _, tool := range []string{"sh", "cat", "dd", "ls", "mount", "rm", "sync", "grep", "wc", "id", "head"} {
		if err := os.Symlink("busybox", filepath.Join(root, "usr/bin", tool)); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []string{"bin", "lib", "lib64"} {
		if err := os.Symlink("usr/"+l, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"usr/lib64", "etc", "tmp", "work"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	put("etc/image-release", []byte("probe image\n"), 0o644)
	return root
}

// TestImageRootProbes runs the escape probes and limits of the suite on a
// root made of layers alone, as an imported image's (no host base): the
// sandbox sees the image's files and none of the host's, cannot mount,
// sees only its own processes and no route out, and its disk and memory
// limits hold. TestRootless reruns it.
func TestImageRootProbes(t *testing.T) {
	rt := testRuntime(t)
	full := func(out string) bool {
		return strings.Contains(out, "No space left") || strings.Contains(out, "Disk quota exceeded")
	}
	sb := create(t, rt, Config{Layers: []string{imageRoot(t)}, Limits: Limits{DiskBytes: 32 << 20, MemoryBytes: 64 << 20}})
	if got := mustOK(t, sb, "cat /etc/image-release; ls /etc"); got != "probe image\nhosts\nimage-release\n" && got != "probe image\nimage-release\n" {
		t.Fatalf("the image's /etc: %q", got)
	}
	for _, host := range []string{"/etc/passwd", "/etc/shadow", "/usr/bin/python3", "/work/main", "/root"} {
		if res := sh(t, sb, "test -e "+host); res.ExitCode == 0 {
			t.Errorf("the host's %s is visible on an image's root", host)
		}
	}
	if out := mustFail(t, sb, "mount -t tmpfs none /tmp 2>&1"); !strings.Contains(out, "ermission") {
		t.Errorf("mount on an image's root: %q, want a permission error", out)
	}
	if got := mustOK(t, sb, "ls /proc | grep -c '^[0-9]'"); atoi(t, got) > 8 {
		t.Errorf("%s processes seen on an image's root, want only the sandbox's few", got)
	}
	for _, line := range strings.Split(mustOK(t, sb, "cat /proc/net/route"), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 1 && f[1] == "00000000" {
			t.Errorf("a default route on an image's root: %q, want no route out", line)
		}
	}
	if out := mustFail(t, sb, "dd if=/dev/zero of=/big bs=1M count=64 2>&1"); !full(out) {
		t.Errorf("64 MiB into a 32 MiB disk on an image's root: %q, want ENOSPC or EDQUOT", out)
	}
	mustOK(t, sb, "rm -f /big")
	if rt.cg.Usable() {
		// A 128 MiB buffer in one process: the cgroup's limit kills it.
		if res := sh(t, sb, "dd if=/dev/zero of=/dev/null bs=128M count=1"); res.ExitCode == 0 {
			t.Errorf("a 128 MiB buffer in a sandbox of 64 MiB on an image's root: exit 0: %s", res.Output)
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}
