package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/session"
	"golang.org/x/sys/unix"
)

// The attacks of issue 7, each as an agent (or a caller's leftover) would
// try it, in both modes.

// testInheritedDescriptors: a descriptor on a host directory that the caller
// left open without close-on-exec (`exec 7</root; msb run ...`) reaches no
// process of the sandbox: not a one-shot command, not a session, not Run,
// and not the supervisor.
func testInheritedDescriptors(t *testing.T, rt *Runtime) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("HOST-SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	n := strconv.Itoa(fd)
	// Run's stdout and stderr are relayed apart (two pipes): one builder
	// each, so that the order in which they arrive cannot matter.
	var out, errOut strings.Builder
	sb := create(t, rt, Config{HostBase: true, Stdio: &Stdio{Out: &out, Err: &errOut}})
	attack := "ls /proc/self/fd | tr '\\n' ' '; cat /proc/self/fd/" + n + "/secret; echo pwned > /proc/self/fd/" + n + "/pwned"
	check := func(how, got string) {
		t.Helper()
		if strings.Contains(got, "HOST-SECRET") {
			t.Errorf("%s read the host file through inherited fd %d: %q", how, fd, got)
		}
		if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
			t.Fatalf("%s wrote into the host dir through inherited fd %d", how, fd)
		}
		if !strings.HasPrefix(got, "0 1 2 3 ") || strings.HasPrefix(got, "0 1 2 3 4") {
			t.Errorf("%s: descriptors %q, want only 0, 1, 2 and ls's own", how, got)
		}
	}
	check("exec", sh(t, sb, attack).Output)
	ctx := context.Background()
	if err := sb.OpenSession(ctx, "s", SessionOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := sb.SessionExec(ctx, "s", session.ExecRequest{Command: attack})
	if err != nil {
		t.Fatal(err)
	}
	check("session", res.Output)
	if _, err := sb.Run(ctx, []string{"bash", "-c", attack}); err != nil {
		t.Fatal(err)
	}
	check("run", out.String())
	if strings.Contains(errOut.String(), "HOST-SECRET") {
		t.Errorf("run read the host file through inherited fd %d: %q", fd, errOut.String())
	}
	// The supervisor holds nothing of the host's either.
	pfd := "/proc/" + strconv.Itoa(sb.InitPid()) + "/fd/"
	ents, err := os.ReadDir(pfd)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if link, _ := os.Readlink(pfd + e.Name()); link == dir {
			t.Errorf("the supervisor holds fd %s -> %s", e.Name(), link)
		}
	}
}

// testStdioNotHostFile: stdin or stdout that is a host file cannot be
// reopened through /proc/self/fd (to read what it held, or truncate it);
// the command still reads and writes them through msb's relay.
func testStdioNotHostFile(t *testing.T, rt *Runtime) {
	dir := t.TempDir()
	f, err := os.CreateTemp(dir, "stdout-")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("HOST-SECRET\n")
	in, err := os.CreateTemp(dir, "stdin-")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	in.WriteString("input line\n")
	in.Seek(0, 0)
	sb := create(t, rt, Config{HostBase: true, Stdio: &Stdio{In: in, Out: f, Err: f}})
	code, err := sb.Run(context.Background(), []string{"sh", "-c",
		"if test -f /proc/self/fd/1; then cat /proc/self/fd/1; : > /proc/self/fd/1; exit 9; fi; " +
			"if test -f /proc/self/fd/0; then : > /proc/self/fd/0; exit 8; fi; readlink /proc/self/fd/1; cat"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(f.Name())
	if code != 0 || strings.Count(string(b), "HOST-SECRET") != 1 || !strings.Contains(string(b), "pipe:[") || !strings.HasSuffix(string(b), "input line\n") {
		t.Fatalf("exit %d; the stdout file holds %q: want its old line, the pipe the command wrote to and its input", code, b)
	}
	if b, _ := os.ReadFile(in.Name()); string(b) != "input line\n" {
		t.Fatalf("the stdin file holds %q", b)
	}
}

// testSupervisorUnreachable: the agent cannot take the supervisor's control
// socket (pidfd_getfd), write its memory, or read its descriptors or
// environment.
func testSupervisorUnreachable(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	out := mustOK(t, sb, `python3 - <<'EOF'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
got = []
pidfd = os.pidfd_open(1)
for fd in range(16):
    if libc.syscall(438, pidfd, fd, 0) >= 0:  # pidfd_getfd
        got.append("pidfd_getfd %d" % fd)
for path, mode in [("/proc/1/mem", "r+b"), ("/proc/1/environ", "rb"), ("/proc/1/maps", "rb")]:
    try:
        open(path, mode).read(1)
        got.append(path)
    except OSError:
        pass
for fd in range(16):
    try:
        os.close(os.open("/proc/1/fd/%d" % fd, os.O_RDONLY))
        got.append("/proc/1/fd/%d" % fd)
    except OSError:
        pass
    try:
        got.append("/proc/1/fd/%d -> %s" % (fd, os.readlink("/proc/1/fd/%d" % fd)))
    except OSError:
        pass
for path in ["/proc/1/root", "/proc/1/cwd"]:
    try:
        os.listdir(path)
        got.append(path)
    except OSError:
        pass
print("reached: " + ", ".join(got) if got else "unreachable")
EOF`)
	if strings.TrimSpace(out) != "unreachable" {
		t.Fatalf("the agent got at the supervisor: %s", out)
	}
}

// testSupervisorThreads: every process of the sandbox, whichever way it was
// started (exec, session, Run), has the cut bounding set and the sandbox's
// cgroup namespace, not the host's; and every thread of the supervisor,
// seen from the host, holds no capability outside that set. (The
// supervisor forks from one thread only; its others keep the full bounding
// set.) The sessions and commands run first make the runtime start more
// threads.
func testSupervisorThreads(t *testing.T, rt *Runtime) {
	var out strings.Builder
	sb := create(t, rt, Config{HostBase: true, Stdio: &Stdio{Out: &out, Err: &out}})
	ctx := context.Background()
	probe := "grep CapBnd /proc/self/status | cut -f2; readlink /proc/self/ns/cgroup"
	want := mustOK(t, sb, probe)
	host, err := os.Readlink("/proc/self/ns/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(want)
	if len(f) != 2 || f[1] == host {
		t.Fatalf("the sandbox's bounding set and cgroup namespace: %q (the host's namespace: %s)", want, host)
	}
	bset, err := strconv.ParseUint(f[0], 16, 64)
	if err != nil || bset&(1<<unix.CAP_SYS_ADMIN) != 0 {
		t.Fatalf("CapBnd %q", f[0])
	}
	if err := sb.OpenSession(ctx, "s", SessionOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := sb.SessionExec(ctx, "s", session.ExecRequest{Command: probe})
	if err != nil || res.Output != want {
		t.Errorf("session: %q, %v; want %q", res.Output, err, want)
	}
	if _, err := sb.Run(ctx, []string{"sh", "-c", probe}); err != nil || out.String() != want {
		t.Errorf("run: %q, %v; want %q", out.String(), err, want)
	}
	tasks := "/proc/" + strconv.Itoa(sb.InitPid()) + "/task/"
	ents, err := os.ReadDir(tasks)
	if err != nil {
		t.Fatal(err)
	}
	capRe := regexp.MustCompile(`(?m)^Cap(Inh|Prm|Eff|Amb):\t([0-9a-f]+)$`)
	for _, e := range ents {
		status, err := os.ReadFile(tasks + e.Name() + "/status")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range capRe.FindAllStringSubmatch(string(status), -1) {
			if v, _ := strconv.ParseUint(m[2], 16, 64); v&^bset != 0 {
				t.Errorf("supervisor thread %s: Cap%s %s, more than the bounding set %s", e.Name(), m[1], m[2], f[0])
			}
		}
	}
	if len(ents) < 4 {
		t.Fatalf("the supervisor has %d threads: the check saw too few", len(ents))
	}
}

// testDiskLimit: what the sandbox writes past its disk limit fails inside;
// the sandbox stays usable, and freed space can be used again.
func testDiskLimit(t *testing.T, rt *Runtime) {
	if e := rt.Enforcement().Disk; strings.HasPrefix(e, "not enforced") {
		t.Fatalf("no disk limit in this mode: %s", e)
	}
	full := func(out string) bool {
		return strings.Contains(out, "No space left") || strings.Contains(out, "Disk quota exceeded")
	}
	sb := create(t, rt, Config{HostBase: true, Limits: Limits{DiskBytes: 64 << 20}})
	if out := mustFail(t, sb, "dd if=/dev/zero of=/bigfile bs=1M count=100 2>&1"); !full(out) {
		t.Fatalf("dd of 100 MiB into a 64 MiB disk: %q, want ENOSPC or EDQUOT", out)
	}
	mustOK(t, sb, "rm /bigfile && sync && dd if=/dev/zero of=/again bs=1M count=16 2>&1")
	small := create(t, rt, Config{HostBase: true, Limits: Limits{DiskBytes: 32 << 20}})
	for _, dir := range []string{"/tmp", "/dev/shm"} {
		if out := mustFail(t, small, "dd if=/dev/zero of="+dir+"/fill bs=1M count=48 2>&1"); !full(out) {
			t.Fatalf("dd of 48 MiB into %s of a 32 MiB disk: %q, want ENOSPC", dir, out)
		}
		mustOK(t, small, "rm "+dir+"/fill")
	}
	// One limit bounds the root, /tmp and /dev/shm together: 3 x 24 MiB
	// into the 32 MiB disk does not fit.
	if written, out := writeEach(t, small, 24); written > 32<<20 || !full(out) {
		t.Fatalf("writing 24 MiB to each of /, /tmp and /dev/shm of a 32 MiB disk wrote %d bytes, want at most 32 MiB and ENOSPC or EDQUOT: %q", written, out)
	}
	mustOK(t, small, "rm -f /fill /tmp/fill /dev/shm/fill")
	// Nothing of it landed in the host's state dir.
	var size int64
	filepath.Walk(rt.stateDir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			size += fi.Size()
		}
		return nil
	})
	if size > 1<<20 {
		t.Fatalf("the state dir holds %d bytes", size)
	}
}

// testHostSecrets: in root mode the sandbox, root as it is, reads in the host
// dirs only what an unprivileged user could; rootless, what its caller can.
func testHostSecrets(t *testing.T, rt *Runtime) {
	// Not under /tmp, which the sandbox's own /tmp covers.
	dir, err := os.MkdirTemp("/var/tmp", "msb-hostdir-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	for name, mode := range map[string]os.FileMode{"public": 0o644, "secret": 0o600, "group": 0o640} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name+"-content\n"), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(dir, name), mode)
	}
	if err := os.Mkdir(filepath.Join(dir, "private"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "private", "key"), []byte("key-content\n"), 0o644)
	hostDirs := append(append([]string(nil), DefaultHostDirs...), dir)
	read := "for f in public secret group private/key; do cat " + dir + "/$f 2>/dev/null || echo no-$f; done"
	sb := create(t, rt, Config{HostBase: true, HostDirs: hostDirs})
	got := mustOK(t, sb, read)
	want := "public-content\nno-secret\nno-group\nno-private/key\n"
	all := "public-content\nsecret-content\ngroup-content\nkey-content\n"
	if rt.Rootless() {
		want = all // the caller's own files
	} else if _, why := rt.idmap(); why != "" {
		want = all // no idmapped mounts (TestCgroupV2's guest): read as root, the masks alone hold
	}
	if got != want {
		t.Fatalf("read %q, want %q", got, want)
	}
	if rt.Rootless() {
		return
	}
	if out := sh(t, sb, "cat /etc/shadow").Output; strings.Contains(out, "root:") {
		t.Fatalf("/etc/shadow readable: %q", out)
	}
	asRoot := create(t, rt, Config{HostBase: true, HostDirs: hostDirs, HostReadAsRoot: true})
	if got := mustOK(t, asRoot, read); got != all {
		t.Fatalf("with HostReadAsRoot: read %q", got)
	}
	testMaskAfterHostRename(t, rt, asRoot)
}

// testMaskAfterHostRename: a sandbox that reads the host dirs as root
// (sb) still cannot read /etc/gshadow after the host replaced it by
// rename, as useradd and passwd do (here with the same bytes, owner and
// mode). A mask mounted over the host's file was detached by the rename;
// a whiteout in an overlay of /etc is not, and msb doctor says which the
// host's sandboxes have.
func testMaskAfterHostRename(t *testing.T, rt *Runtime, sb *Sandbox) {
	const f = "/etc/gshadow"
	read := "cat " + f + " 2>/dev/null | grep -c : || true"
	if got := mustOK(t, sb, read); got != "0\n" {
		t.Fatalf("%s read as root: %q lines, want none", f, got)
	}
	said := rt.hostFilesCheck().Detail
	if !strings.Contains(said, "masked paths as whiteouts in an overlay") {
		privtest.Skip(t, "msb doctor's host files: %s", said)
	}
	if got := mustOK(t, sb, "test -e "+f+" && echo there || echo absent"); got != "absent\n" {
		t.Fatalf("%s in the sandbox: %q, want it absent (a whiteout), as msb doctor says: %s", f, got, said)
	}
	fi, err := os.Stat(f)
	if err != nil {
		t.Skipf("no %s on this host: %v", f, err)
	}
	// The lock of lckpwdf(3), which shadow's tools (useradd, as other
	// tests run it) take before they change the file: none of their
	// changes is lost to the copy put back.
	lock, err := os.OpenFile("/etc/.pwd.lock", os.O_WRONLY|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close() // releases the lock
	if err := syscall.FcntlFlock(lock.Fd(), syscall.F_SETLKW, &syscall.Flock_t{Type: syscall.F_WRLCK}); err != nil {
		t.Fatalf("locking /etc/.pwd.lock: %v", err)
	}
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	tmp := f + ".msb-test+"
	if err := os.WriteFile(tmp, data, fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(tmp)
	if err := os.Chmod(tmp, fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, int(st.Uid), int(st.Gid)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f); err != nil {
		t.Fatal(err)
	}
	if got := mustOK(t, sb, read); got != "0\n" {
		t.Fatalf("after the host replaced %s by rename, the sandbox read %q of its lines as root, want none", f, got)
	}
}

// writeEach writes mib MiB to a file in each of /, /tmp and /dev/shm and
// returns the bytes the three files hold and what dd said.
func writeEach(t *testing.T, sb *Sandbox, mib int) (int64, string) {
	t.Helper()
	out := sh(t, sb, "for f in /fill /tmp/fill /dev/shm/fill; do dd if=/dev/zero of=$f bs=1M count="+strconv.Itoa(mib)+" 2>&1; done; "+
		"stat -c %s /fill /tmp/fill /dev/shm/fill 2>/dev/null | awk '{ n += $1 } END { print n + 0 }'").Output
	lines := strings.Split(strings.TrimSpace(out), "\n")
	written, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
	if err != nil {
		t.Fatalf("the sizes written: %v in %q", err, out)
	}
	return written, out
}

// testMemoryBoundWithoutCgroup: where no cgroup holds the memory limit,
// the sandbox's disk tmpfs, which holds what it writes to its root, /tmp
// and /dev/shm, stays within it.
func testMemoryBoundWithoutCgroup(t *testing.T, rt *Runtime) {
	if rt.cg.Usable() {
		t.Skip("a cgroup holds the memory limit, files in tmpfs included (see MemoryBomb)")
	}
	sb := create(t, rt, Config{HostBase: true, Limits: Limits{MemoryBytes: 64 << 20}})
	if written, out := writeEach(t, sb, 30); written > 64<<20 || !strings.Contains(out, "No space left") {
		t.Fatalf("30 MiB into each of /, /tmp and /dev/shm of a sandbox of 64 MiB wrote %d bytes: %q", written, out)
	}
	mustOK(t, sb, "rm -f /fill /tmp/fill /dev/shm/fill; dd if=/dev/zero of=/tmp/fill bs=1M count=40 2>&1; rm /tmp/fill")
	// Empty files take no pages: their number is bounded too.
	out := mustOK(t, sb, `python3 -c '
n = 0
try:
    for n in range(100000):
        open("/tmp/e%d" % n, "w").close()
except OSError as e:
    print("stopped after", n, e.strerror)'`)
	if !strings.Contains(out, "stopped after") {
		t.Fatalf("100000 empty files fit in a disk tmpfs of 64 MiB: %q", out)
	}
}
