package mount

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// Lines the kernel wrote (Linux 6.x): a tmpfs named "my src" mounted at
// "a b" in a namespace with shared propagation, a bind below it made a
// slave (optional fields shared:N, master:N), and a sandbox's root
// overlay with no optional field.
const kernelMountinfo = `1313 1218 0:438 / /tmp/h5/mi/a\040b rw,relatime shared:23 - tmpfs my\040src rw,size=1024k
1314 1313 0:438 /c /tmp/h5/mi/a\040b/c rw,relatime master:23 - tmpfs my\040src rw,size=1024k
900 800 0:50 / / rw,relatime - overlay overlay rw,lowerdir=/proc/self/fd/7,upperdir=/proc/self/fd/8,workdir=/proc/self/fd/9,volatile
`

func TestParseMountinfo(t *testing.T) {
	got, err := ParseMountinfo(strings.NewReader(kernelMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	want := []Info{
		{ID: 1313, Parent: 1218, Root: "/", Point: "/tmp/h5/mi/a b", Options: "rw,relatime", FSType: "tmpfs", Source: "my src", Super: []string{"rw", "size=1024k"}},
		{ID: 1314, Parent: 1313, Root: "/c", Point: "/tmp/h5/mi/a b/c", Options: "rw,relatime", FSType: "tmpfs", Source: "my src", Super: []string{"rw", "size=1024k"}},
		{ID: 900, Parent: 800, Root: "/", Point: "/", Options: "rw,relatime", FSType: "overlay", Source: "overlay",
			Super: []string{"rw", "lowerdir=/proc/self/fd/7", "upperdir=/proc/self/fd/8", "workdir=/proc/self/fd/9", "volatile"}},
	}
	if len(got) != len(want) {
		t.Fatalf("parsed %d mounts, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if g, w := got[i], want[i]; g.ID != w.ID || g.Parent != w.Parent || g.Root != w.Root || g.Point != w.Point ||
			g.Options != w.Options || g.FSType != w.FSType || g.Source != w.Source || strings.Join(g.Super, ",") != strings.Join(w.Super, ",") {
			t.Errorf("line %d: got %+v, want %+v", i+1, g, w)
		}
	}
}

func TestParseMountinfoRejects(t *testing.T) {
	for _, line := range []string{
		"1 2 3",                     // short
		"1 2 0:1 / / rw shared:1 x", // no "-"
		"1 2 0:1 / / rw - tmpfs",    // too little after "-"
		"a 2 0:1 / / rw - tmpfs tmpfs rw",
	} {
		if _, err := ParseMountinfo(strings.NewReader(line + "\n")); err == nil {
			t.Errorf("%q parsed", line)
		}
	}
}

// TestReadMountinfoLive mounts a tmpfs whose name and mount point hold a
// space, in a mount namespace of its own (unshare(1)) with shared
// propagation, and parses the mountinfo the kernel shows there.
func TestReadMountinfoLive(t *testing.T) {
	privtest.RequireRoot(t)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		privtest.Skip(t, "no unshare(1): %v", err)
	}
	point := filepath.Join(t.TempDir(), "a b")
	if err := os.Mkdir(point, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "mountinfo")
	cmd := exec.Command(unshare, "--mount", "--propagation", "shared", "sh", "-c",
		`mount -t tmpfs -o size=1m "my src" "$1" && cp /proc/self/mountinfo "$2"`, "sh", point, out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mounting in a new namespace: %v: %s", err, b)
	}
	ms, err := ReadMountinfo(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Point == point {
			if m.FSType != "tmpfs" || m.Source != "my src" || m.Root != "/" {
				t.Errorf("mount at %q: %+v", point, m)
			}
			return
		}
	}
	t.Fatalf("no mount at %q in %+v", point, ms)
}

func TestReadMountinfoSelf(t *testing.T) {
	ms, err := ReadMountinfo("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Point == "/" {
			return
		}
	}
	t.Fatalf("no mount at / in %+v", ms)
}
