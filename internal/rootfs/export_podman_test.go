package rootfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/minisandbox/msb/internal/privtest"
)

// testPodman runs podman with its own storage and configuration under a
// temp dir, never the host's store.
type testPodman struct {
	t   *testing.T
	env []string
}

// newTestPodman writes podman's configuration under a temp dir: overlay
// storage there, cgroupfs, events in a file, and runc where the host's
// cgroups are hybrid (crun refuses them). It skips when podman or an OCI
// runtime is absent (a failure when the suite is strict).
func newTestPodman(t *testing.T) *testPodman {
	t.Helper()
	privtest.RequireRoot(t)
	if _, err := exec.LookPath("podman"); err != nil {
		privtest.Skip(t, "podman is not installed (apt-get install podman; .ci/deps has it)")
	}
	runtimes := []string{"crun", "runc"}
	if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.controllers"); err == nil {
		runtimes = []string{"runc"} // crun refuses hybrid cgroup v1+v2 hosts
	}
	rt := ""
	for _, r := range runtimes {
		if _, err := exec.LookPath(r); err == nil && rt == "" {
			rt = r
		}
	}
	if rt == "" {
		privtest.Skip(t, "podman needs an OCI runtime here: one of %v", runtimes)
	}
	dir := t.TempDir()
	conf, storage := filepath.Join(dir, "containers.conf"), filepath.Join(dir, "storage.conf")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	nofile, nproc := hardLimit(t, unix.RLIMIT_NOFILE), min(hardLimit(t, unix.RLIMIT_NPROC), pidMax(t))
	write(conf, fmt.Sprintf("[containers]\ndefault_ulimits = [\"nofile=%d:%d\", \"nproc=%d:%d\"]\n"+
		"[engine]\nruntime = %q\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n", nofile, nofile, nproc, nproc, rt))
	write(storage, fmt.Sprintf("[storage]\ndriver = \"overlay\"\ngraphroot = %q\nrunroot = %q\n",
		filepath.Join(dir, "root"), filepath.Join(dir, "run")))
	p := &testPodman{t: t, env: append(os.Environ(), "CONTAINERS_CONF="+conf, "CONTAINERS_STORAGE_CONF="+storage)}
	t.Cleanup(func() {
		// The overlay driver leaves its home mounted; reset unmounts it.
		if out, err := p.cmd("system", "reset", "--force").CombinedOutput(); err != nil {
			t.Errorf("podman system reset: %v: %s", err, out)
		}
	})
	return p
}

// hardLimit is this process's hard limit of a resource, at most 1<<20:
// podman's default ulimits, above it, fail the container's start.
func hardLimit(t *testing.T, resource int) uint64 {
	var l unix.Rlimit
	if err := unix.Getrlimit(resource, &l); err != nil {
		t.Fatal(err)
	}
	return min(l.Max, 1<<20)
}

// pidMax is kernel.pid_max: a process limit above it fails in setrlimit.
func pidMax(t *testing.T) uint64 {
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (p *testPodman) cmd(args ...string) *exec.Cmd {
	c := exec.CommandContext(context.Background(), "podman", args...)
	c.Env = p.env
	return c
}

// out runs podman and returns its stdout, failing the test on an error.
func (p *testPodman) out(args ...string) string {
	p.t.Helper()
	var stdout, stderr bytes.Buffer
	c := p.cmd(args...)
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		p.t.Fatalf("podman %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// busyboxLayer holds the host's static busybox as /bin/busybox with
// /bin/sh and /bin/cat linking to it, so podman can run the image.
func busyboxLayer(t *testing.T) []ent {
	t.Helper()
	b, err := os.ReadFile("/bin/busybox")
	if err != nil {
		privtest.Skip(t, "no /bin/busybox (apt-get install busybox-static): %v", err)
	}
	bb := file("bin/busybox", string(b))
	bb.Mode = 0o755
	return []ent{dir("bin"), bb, symlink("bin/sh", "busybox"), symlink("bin/cat", "busybox")}
}

// TestExportPodman: an imported image with a whiteout and an opaque
// directory, exported as an oci-archive and as a docker-archive, loads
// into podman, runs there, and podman's view of its root holds the same
// files, modes, owners and contents as the tree msb builds of it.
func TestExportPodman(t *testing.T) {
	p := newTestPodman(t)
	st := openStore(t)
	rec := importLayoutOf(t, st, "", append(busyboxLayer(t), baseLayer()...), topLayer())
	ref := DigestRef(rec.Digest)
	msbTree, _ := merged(t, st, ref)
	want := treeListing(t, msbTree)

	out := t.TempDir()
	for _, dest := range []string{
		"oci-archive:" + filepath.Join(out, "img.tar") + ":localhost/msb-test/oci:1",
		"docker-archive:" + filepath.Join(out, "docker.tar") + ":localhost/msb-test/docker:1",
	} {
		ex := exportImported(t, st, ref, dest)
		file, _ := splitExportRef(strings.SplitN(dest, ":", 2)[1])
		p.out("load", "-q", "-i", file)
		img := "localhost/" + strings.TrimPrefix(ex.Reference, "localhost/")
		if got := p.out("run", "--rm", "--network", "none", img, "cat", "/etc/keep", "/opaque/new"); got != "kept and changed\nnew\n" {
			t.Errorf("%s: podman run cat: %q", dest, got)
		}
		if got := p.out("run", "--rm", "--network", "none", img, "sh", "-c", "id -u; pwd; echo $GREETING"); got != "1000\n/home/app\nhi\n" {
			t.Errorf("%s: podman run's user, dir and env: %q", dest, got)
		}
		mnt := strings.TrimSpace(p.out("image", "mount", img))
		got := treeListing(t, mnt)
		p.out("image", "unmount", img)
		if !slices.Equal(got, want) {
			t.Errorf("%s: podman's tree differs from msb's:\n%s", dest, listingDiff(want, got))
		}
	}
}

// treeListing describes every path under root: type, mode, owner, and a
// symlink's target or a file's content digest.
func treeListing(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		sys := fi.Sys().(*syscall.Stat_t)
		line := fmt.Sprintf("%s %v %d:%d", rel, fi.Mode(), sys.Uid, sys.Gid)
		switch {
		case rel == ".":
			return nil // the mount point's own metadata is the storage's
		case fi.Mode()&fs.ModeSymlink != 0:
			tgt, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + tgt
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// listingDiff shows the lines only one listing has.
func listingDiff(want, got []string) string {
	var b strings.Builder
	for _, l := range want {
		if !slices.Contains(got, l) {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range got {
		if !slices.Contains(want, l) {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	return b.String()
}
