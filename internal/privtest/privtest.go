// Package privtest holds what the tests of privileged packages share: the
// check that no sandbox of the test process outlived the tests, the rerun
// of a test binary as an unprivileged user (the rootless mode), and skips
// that turn into failures when the suite says it has the privileges
// (MSB_TEST_STRICT=1, MSB_TEST_REQUIRE_ROOT=1, both set by make test).
//
// A Leak is a sandbox init still running as a child of the test process, or
// a mount whose path names the test's state; a pool leak is a loop device
// still attached to a disk pool this process made. Other test binaries
// running at the same time (go test runs packages in parallel) are not this
// process's leaks and are ignored.
package privtest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/sandbox/pool"
)

// User is the unprivileged account rootless tests run as; Unprivileged
// creates it when missing.
const User = "msbtest"

// Environment variables that make privilege skips failures.
const (
	// StrictEnv=1: the host has every feature the suite uses (user
	// namespaces, cgroups, overlayfs, python3, git); a test that would skip
	// for lack of one fails instead.
	StrictEnv = "MSB_TEST_STRICT"
	// RequireRootEnv=1: the suite runs as root; a test that needs root
	// fails instead of skipping when it is not.
	RequireRootEnv = "MSB_TEST_REQUIRE_ROOT"
	// StateBaseEnv is where the rootless rerun lets tests make state dirs.
	StateBaseEnv = "MSB_TEST_STATE_BASE"
)

// Strict reports whether StrictEnv is set.
func Strict() bool { return os.Getenv(StrictEnv) == "1" }

// Skip skips t for lack of a host feature or privilege, or fails it when
// the suite is strict: under make test nothing is skipped silently.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Strict() {
		t.Fatalf("%s (%s=1: the suite must have this; fix the host, see .ci/run)", msg, StrictEnv)
	}
	t.Skip(msg)
}

// PythonEnv names the interpreter of the test venv (.venv-test, which make
// test makes from the pinned requirements and sets it to).
const PythonEnv = "MSB_TEST_PYTHON"

// Python returns the test venv's interpreter (PythonEnv), or skips t (fails
// it when strict) saying that the test needs it for what.
func Python(t testing.TB, what string) string {
	t.Helper()
	py := os.Getenv(PythonEnv)
	if py == "" {
		Skip(t, "%s is not set: %s needs the test venv's python (make test-venv makes it, make test sets it)", PythonEnv, what)
	}
	return py
}

// PytestPython returns the first host interpreter of python3 on PATH and
// Debian's /usr/bin/python3 that imports pytest (.ci/deps installs
// python3-pytest for the second), or skips t (fails it when strict).
func PytestPython(t testing.TB) string {
	t.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		out, err := exec.Command(py, "-c", "import pytest, sys; print(sys.executable)").Output()
		if err == nil {
			return strings.TrimSpace(string(out))
		}
	}
	Skip(t, "no host python3 with pytest (python3 on PATH, /usr/bin/python3): .ci/deps installs python3-pytest")
	return ""
}

// RequireRoot skips a test that needs root when not root, or fails it
// when RequireRootEnv says the suite runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv(RequireRootEnv) == "1" {
		t.Fatalf("test needs root but %s=1 and we are uid %d", RequireRootEnv, os.Geteuid())
	}
	t.Skip("needs root")
}

// StatePrefix is the name prefix of this process's state directories
// (StateDir): it holds the pid, so that a leak check given it
// (CheckLeaks("/"+StatePrefix())) counts this test binary's mounts and not
// those of another package's tests running beside it, which share the
// host's mount table (go test runs packages in parallel).
func StatePrefix() string {
	return "msb-test-state-" + strconv.Itoa(os.Getpid()) + "-"
}

// StateDir makes a state directory for a test's sandbox runtime, under
// StateBaseEnv in the rootless rerun (a directory its user owns), else
// under the temp dir; it is removed after the test, which fails if a
// sandbox left anything in it.
func StateDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp(os.Getenv(StateBaseEnv), StatePrefix())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if e.Name() != ".empty" && e.Name() != ".mnt" && !strings.HasPrefix(e.Name(), ".probed-") { // a sandbox runtime's own, made once
				t.Errorf("state dir %s still holds %s after the test", dir, e.Name())
			}
		}
		os.RemoveAll(dir)
	})
	return dir
}

// Leaks lists sandbox inits that are children of this process and mounts in
// this mount namespace whose line contains mountMark.
func Leaks(mountMark string) []string {
	var leaks []string
	self := strconv.Itoa(os.Getpid())
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		cmdline, err := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if err != nil || !strings.HasPrefix(string(cmdline), "msb-sandbox-") {
			continue
		}
		if stat, err := os.ReadFile("/proc/" + p.Name() + "/stat"); err == nil {
			s := string(stat)
			if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 1 && f[1] == self {
				leaks = append(leaks, "process "+p.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
			}
		}
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil && mountMark != "" {
		for _, line := range strings.Split(string(mi), "\n") {
			if strings.Contains(line, mountMark) {
				leaks = append(leaks, "mount: "+line)
			}
		}
	}
	return leaks
}

// CheckLeaks returns an error naming the leaks, if any.
func CheckLeaks(mountMark string) error {
	if l := Leaks(mountMark); len(l) > 0 {
		return fmt.Errorf("%d leaks:\n%s", len(l), strings.Join(l, "\n"))
	}
	return nil
}

// TestPoolDir makes a directory for the disk pool of a test binary's
// runtimes (RuntimeOptions.DiskDir), so that tests leave the host's pool
// alone; CheckPool removes it. Rootless: "", no pool.
func TestPoolDir() string {
	if os.Geteuid() != 0 {
		return ""
	}
	dir, err := os.MkdirTemp("", "msb-test-disk-")
	if err != nil {
		panic(err)
	}
	return dir
}

// CheckPool checks that the disk pool in dir (see TestPoolDir) holds no
// volume (every sandbox was closed and cleaned up), naming those left,
// then destroys it and waits a little for its loop device to detach.
// TestMain calls it whether or not the tests passed: the test that failed
// is often the one that left a volume.
func CheckPool(dir string) error {
	if dir == "" {
		return nil
	}
	var errs []error
	poolDir := filepath.Join(dir, "msb-pool")
	if pool.Exists(poolDir) {
		if p, err := pool.Open(pool.Options{Dir: poolDir}); err != nil {
			errs = append(errs, err)
		} else {
			if names, err := p.Volumes(); err != nil {
				errs = append(errs, fmt.Errorf("disk pool %s: listing its volumes: %w", poolDir, err))
			} else if len(names) > 0 {
				errs = append(errs, fmt.Errorf("disk pool %s: %d volumes left: %s", poolDir, len(names), strings.Join(names, ", ")))
			}
			p.Close()
		}
		errs = append(errs, pool.Destroy(poolDir))
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	for i := 0; ; i++ {
		files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
		var left []string
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && strings.HasPrefix(string(b), dir+"/") {
				left = append(left, filepath.Base(filepath.Dir(filepath.Dir(f)))+": "+strings.TrimSpace(string(b)))
			}
		}
		if len(left) == 0 {
			break
		}
		if i == 100 {
			errs = append(errs, fmt.Errorf("disk pool left attached: %s", strings.Join(left, ", ")))
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.Join(errs...)
}

// Unprivileged reruns the tests matching run of the current test binary as
// User, with MSB_TEST_STATE_BASE and TMPDIR pointing to a directory that
// user owns, and fails t when they fail. User has subordinate ids (SubIDs)
// for the sandboxes that run as a user other than root. The test binary lives in a
// root-only build dir, so it is copied somewhere the user can execute.
func Unprivileged(t *testing.T, run string) {
	t.Helper()
	UnprivilegedEnv(t, run)
}

// UnprivilegedEnv is Unprivileged with more environment variables
// ("NAME=value") for the rerun.
func UnprivilegedEnv(t *testing.T, run string, env ...string) {
	t.Helper()
	UnprivilegedIn(t, run, nil, env...)
}

// UnprivilegedIn is UnprivilegedEnv with the rerun started in the cgroup
// directories join (one per v1 hierarchy, or one v2 directory): the rerun
// moves itself there, as the user, before the tests start.
func UnprivilegedIn(t *testing.T, run string, join []string, env ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the other tests cover the rootless mode")
	}
	u := ensureUser(t)
	SubIDs(t)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "msb-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	exe := filepath.Join(dir, filepath.Base(os.Args[0]))
	CopyExecutable(t, "/proc/self/exe", exe)
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(state, uid, gid); err != nil {
		t.Fatal(err)
	}
	args := []string{"-test.run=" + run, "-test.count=1", "-test.timeout=" + childTimeout(t).String()}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	cmd := exec.Command(exe, args...)
	if len(join) > 0 {
		script := ""
		for _, d := range join {
			script += "echo $$ > '" + filepath.Join(d, "cgroup.procs") + "' || exit 1; "
		}
		cmd = exec.Command("/bin/sh", append([]string{"-c", script + `exec "$@"`, "sh", exe}, args...)...)
	}
	cmd.Dir = state
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/go/bin", "HOME=" + u.HomeDir, StateBaseEnv + "=" + state,
		"TMPDIR=" + state, StrictEnv + "=" + os.Getenv(StrictEnv)}
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	t.Logf("%s as %s (uid %d):\n%s", run, User, uid, out)
	if err != nil {
		t.Fatalf("rootless run failed: %v", err)
	}
}

// childTimeout is the rerun's own timeout: a minute short of the parent's
// deadline, so that a hang is reported with the child's output, and 10
// minutes when the parent has none.
func childTimeout(t *testing.T) time.Duration {
	d, ok := t.Deadline()
	if !ok {
		return 10 * time.Minute
	}
	return max(time.Until(d)-time.Minute, time.Minute).Round(time.Second)
}

func ensureUser(t *testing.T) *user.User {
	t.Helper()
	if u, err := user.Lookup(User); err == nil {
		return u
	}
	if out, err := exec.Command("useradd", "--create-home", "--shell", "/bin/bash", User).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v: %s", User, err, out)
	}
	u, err := user.Lookup(User)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// CopyExecutable copies the program src to dst, mode 0755.
func CopyExecutable(t testing.TB, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// DelegateCgroupV1 does, as root, what an administrator does to give User
// cgroup limits on a host whose memory and pids controllers are on cgroup
// v1: a directory in each v1 hierarchy, owned by User. It returns the
// MSB_CGROUP_PARENT that names a parent below it, and the directories; they
// (and any group left in them) are removed after the test. A host without
// v1 memory and pids hierarchies (pure cgroup v2) has nothing of the kind
// to delegate: the test is skipped, even when strict.
func DelegateCgroupV1(t *testing.T) (parent string, dirs []string) {
	t.Helper()
	u := ensureUser(t)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	name := fmt.Sprintf("msb-test-delegated-%d", os.Getpid())
	var made []string
	for _, c := range []string{"memory", "pids", "cpu", "cpuacct"} {
		base := filepath.Join("/sys/fs/cgroup", c)
		if _, err := os.Stat(filepath.Join(base, "cgroup.procs")); err != nil || isV2(base) {
			if c == "memory" || c == "pids" {
				t.Skipf("no cgroup v1 %s hierarchy at %s: v1 delegation does not apply to this host", c, base)
			}
			continue
		}
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		made = append(made, dir)
		if err := chownTree(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, d := range made {
			removeCgroupTree(t, d)
		}
	})
	return filepath.Join("/sys/fs/cgroup/memory", name, "msb"), made
}

// isV2 reports whether dir is in a cgroup v2 hierarchy.
func isV2(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "cgroup.controllers"))
	return err == nil
}

// chownTree gives a cgroup directory and its files to uid, as delegation
// does.
func chownTree(dir string, uid, gid int) error {
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, uid, gid)
	})
}

// removeCgroupTree removes a cgroup directory and the groups below it,
// deepest first, killing what still runs in them; what the rerun left is
// reported.
func removeCgroupTree(t *testing.T, dir string) {
	var dirs []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		if i > 0 && filepath.Base(filepath.Dir(d)) == "msb" {
			t.Errorf("cgroup %s left behind by the rootless run", d)
		}
		for try := 0; try < 200; try++ {
			if b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs")); len(strings.TrimSpace(string(b))) > 0 {
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			if err := os.Remove(d); err == nil || os.IsNotExist(err) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// diskDirEnv is sandbox.DiskDirEnv (privtest cannot import sandbox, whose
// tests import it).
const diskDirEnv = "MSB_DISK_DIR"

// OwnDiskPool gives a test binary run outside make test (which sets
// MSB_DISK_DIR for the whole suite) a disk pool of its own: it points
// MSB_DISK_DIR at a TestPoolDir, so that the root-mode runtimes and msb
// commands its tests start do not make and keep the host's pool
// (/var/tmp/msb-pool); done unmounts and removes it. A no-op when
// MSB_DISK_DIR is set, and rootless.
func OwnDiskPool() (done func()) {
	dir := ""
	if os.Getenv(diskDirEnv) == "" {
		dir = TestPoolDir()
	}
	if dir == "" {
		return func() {}
	}
	os.Setenv(diskDirEnv, dir)
	return func() {
		os.Unsetenv(diskDirEnv)
		pool.Destroy(filepath.Join(dir, "msb-pool"))
		os.RemoveAll(dir)
	}
}
