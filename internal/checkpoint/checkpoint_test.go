package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/sandbox/sbinit"
	"github.com/minisandbox/msb/internal/sandbox/wire"
	"github.com/minisandbox/msb/internal/session"
	"golang.org/x/sys/unix"
)

var testDiskDir string

// TestMain lets the test binary serve as the sandbox's init, as msb does.
func TestMain(m *testing.M) {
	if sbinit.IsChild() {
		sbinit.Main()
	}
	testDiskDir = privtest.TestPoolDir()
	os.Exit(privtest.RunChecked(m, privtest.Checks{PoolDir: testDiskDir, Mounts: "/" + privtest.StatePrefix()}))
}

// testCriu returns the criu on PATH, or skips when it is missing, too old
// or its check fails on this kernel, failing instead when the suite is
// strict: make test's .ci/deps builds criu 4.1.1, whose check passes on
// CI's kernel.
func testCriu(t *testing.T) *Criu {
	t.Helper()
	c, err := Find(context.Background(), "")
	if err != nil {
		privtest.Skip(t, "%v", err)
	}
	return c
}

// TestDumpRestoreCarriesMemory dumps a sandbox running a Python counter
// and a shell loop, closes it, restores its processes twice, each over a
// new root, and checks through each restored supervisor that both go on
// from the numbers they held, with the token each drew at its start: what
// only their memory had.
func TestDumpRestoreCarriesMemory(t *testing.T) {
	privtest.RequireRoot(t)
	criu := testCriu(t)
	// A sandbox's disk is a volume of the disk pool, or, where there is
	// none (a pool dir no pool can be made in), a tmpfs that only its
	// mount namespace shows: its /dev/shm is then a bind of a dir of a
	// filesystem the sandbox does not show whole. Its network is the
	// host's, or (none, the default) a namespace of its own made ahead,
	// which CRIU dumps and each restore makes anew.
	for _, c := range []struct{ name, disk, network string }{
		{"pool", testDiskDir, sandbox.NetworkHost},
		{"tmpfs", "/proc/no-disk-pool", sandbox.NetworkHost},
		{"netns", testDiskDir, sandbox.NetworkNone},
	} {
		t.Run(c.name, func(t *testing.T) { testDumpRestore(t, criu, c.disk, c.network) })
	}
}

func testDumpRestore(t *testing.T, criu *Criu, diskDir, network string) {
	rt, state := newTestRuntime(t, diskDir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb := createDumpable(ctx, t, rt, sandbox.Config{HostBase: true, Network: network})
	closed := false
	t.Cleanup(func() {
		if !closed {
			sb.Close()
		}
	})
	const start = `setsid python3 -c '
import os, time
token, n = os.urandom(8).hex(), 0
while True:
    if os.path.exists("/tmp/pause"):
        if not os.path.exists("/tmp/py.paused"):
            open("/tmp/py.paused.new", "w").close()
            os.rename("/tmp/py.paused.new", "/tmp/py.paused")
        time.sleep(0.02)
        continue
    n += 1
    with open("/tmp/py.new", "w") as f:
        f.write("%s %d" % (token, n))
    os.rename("/tmp/py.new", "/tmp/py")
    time.sleep(0.02)
' </dev/null >/dev/null 2>&1 &
setsid sh -c 't=$(od -An -N8 -tx8 /dev/urandom | tr -d " "); i=0
while :; do
	if [ -e /tmp/pause ]; then
		[ -e /tmp/sh.paused ] || { : > /tmp/sh.paused.new; mv /tmp/sh.paused.new /tmp/sh.paused; }
		sleep 0.02; continue
	fi
	i=$((i+1)); echo "$t $i" > /tmp/sh.new; mv /tmp/sh.new /tmp/sh; sleep 0.02
done' </dev/null >/dev/null 2>&1 &`
	// A session's background jobs live on (a one-shot Exec's end with it).
	if err := sb.OpenSession(ctx, "bg", sandbox.SessionOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := sb.SessionExec(ctx, "bg", session.ExecRequest{Command: start, Timeout: 10 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("starting the counters: %v %+v", err, res)
	}
	read := func(exec func(string) (session.Result, error)) (py, sh counter) {
		t.Helper()
		var res session.Result
		for range 500 {
			var err error
			res, err = exec("cat /tmp/py; echo; cat /tmp/sh")
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(res.Output), "\n")
			if res.ExitCode == 0 && len(lines) == 2 {
				py, sh = parseCounter(t, lines[0]), parseCounter(t, lines[1])
				if py.n >= 3 && sh.n >= 3 {
					return py, sh
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("the counters did not reach 3 in 10 s: %+v", res)
		return
	}
	const owners = "stat -c '%u %n' /usr/bin/env /etc/passwd"
	own0, err := sb.Exec(ctx, session.ExecRequest{Command: owners, Timeout: 10 * time.Second})
	if err != nil || own0.ExitCode != 0 {
		t.Fatalf("%s: %v %+v", owners, err, own0)
	}
	py0, sh0 := read(func(cmd string) (session.Result, error) {
		return sb.Exec(ctx, session.ExecRequest{Command: cmd, Timeout: 10 * time.Second})
	})

	// The counters stop writing before the dump (each says so once its
	// files are closed): a process the dump catches with /tmp/py.new open
	// cannot be restored over a new root, which lacks that file. The new
	// roots have no /tmp/pause: the restored counters write again.
	const pause = `touch /tmp/pause; for i in $(seq 500); do [ -e /tmp/py.paused ] && [ -e /tmp/sh.paused ] && exit 0; sleep 0.02; done; exit 1`
	if res, err := sb.Exec(ctx, session.ExecRequest{Command: pause, Timeout: 20 * time.Second}); err != nil || res.ExitCode != 0 {
		t.Fatalf("pausing the counters: %v %+v", err, res)
	}
	cgroups0 := procCgroups(t, sb.InitPid())
	dir := t.TempDir()
	dumpStart := time.Now()
	man, err := criu.Dump(ctx, DumpOptions{Init: sb.InitPid(), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dumped with criu %s in %v: %d external mounts, %d external files, images %d KiB", man.Criu,
		time.Since(dumpStart).Round(time.Millisecond), len(man.Mounts), len(man.Files), dirSize(t, dir)>>10)
	if want := network == sandbox.NetworkNone; man.Netns != want {
		t.Errorf("the manifest's netns (the namespace left out of the dump) is %v, want %v", man.Netns, want)
	}
	closed = true
	if err := sb.Close(); err != nil { // its processes are gone already
		t.Logf("closing the dumped sandbox: %v", err)
	}

	idmapped := 0
	for _, m := range man.Mounts {
		if m.Idmapped {
			idmapped++
		}
	}
	var idmap *os.File
	// Each restore gets cgroups of its own beside the dumped sandbox's,
	// which its close removed.
	restore := func(i int) (root string, r *Restored) {
		t.Helper()
		root = newRoot(t, filepath.Join(state, ".empty"))
		roots := map[string]string{}
		for ctl, path := range cgroups0 {
			roots[ctl] = fmt.Sprintf("%s-r%d", path, i)
		}
		opts := RestoreOptions{Dir: dir, Root: root, Mounts: map[string]string{"/dev/shm": t.TempDir()}, Idmap: idmap, CgroupRoots: roots,
			Files: map[string]string{}}
		if man.Netns {
			if _, err := criu.Restore(ctx, opts); err == nil {
				t.Fatal("restored a dump that left its network namespace out without RestoreOptions.Netns")
			}
			opts.Netns = newNetns(t)
		}
		for _, f := range man.Files {
			if f.Path == "" { // a tmpfs disk's root: the new sandbox's disk
				opts.Files[f.ID] = t.TempDir()
			}
		}
		if idmapped > 0 && idmap == nil {
			if _, err := criu.Restore(ctx, opts); err == nil {
				t.Fatal("restored idmapped host dirs without RestoreOptions.Idmap")
			}
			idmap = unmappedUserns(t)
			opts.Idmap = idmap
		}
		start := time.Now()
		r, err := criu.Restore(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("restored in %v", time.Since(start).Round(time.Millisecond))
		cgroups := procCgroups(t, r.Process.Pid)
		t.Cleanup(func() {
			r.Control.Close()
			r.Process.Kill()
			r.Process.Wait()
			for ctl, path := range cgroups {
				removeCgroup(t, ctl, path)
			}
		})
		if !maps.Equal(cgroups, roots) {
			t.Errorf("restore %d is in the cgroups %v, want %v", i, cgroups, roots)
		}
		if network == sandbox.NetworkNone {
			if got, want := netnsOf(t, r.Process.Pid), nsInode(t, opts.Netns); got != want {
				t.Errorf("restore %d is in network namespace %d, want the one given (%d)", i, got, want)
			}
		}
		for ctl, path := range cgroups0 {
			if _, err := os.Stat(cgroupDir(ctl, path)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the dumped sandbox's cgroup %s: %v, want it gone", cgroupDir(ctl, path), err)
			}
		}
		return root, r
	}
	// One dump restored twice, the first still running: two sandboxes
	// that go on from the same state, each on its own root.
	var restored []*Restored
	for i := range 2 {
		root, r := restore(i)
		restored = append(restored, r)
		var id uint64
		py1, sh1 := read(func(cmd string) (session.Result, error) {
			id++
			return call(r.Control, id, cmd)
		})
		t.Logf("restore %d: python %v, shell %v before the dump; restored: python %v, shell %v", i, py0, sh0, py1, sh1)
		if py1.token != py0.token || py1.n <= py0.n {
			t.Errorf("restore %d: python's counter: %v before the dump, %v restored: want the same token and a larger count", i, py0, py1)
		}
		if sh1.token != sh0.token || sh1.n <= sh0.n {
			t.Errorf("restore %d: the shell's counter: %v before the dump, %v restored: want the same token and a larger count", i, sh0, sh1)
		}
		// The host dirs are seen through the same idmap as before (owned
		// by nobody: the sandbox's root reads them as others do).
		id++
		own1, err := call(r.Control, id, owners)
		if err != nil || own1.Output != own0.Output {
			t.Errorf("restore %d: owners of host files: %q before the dump, %q (%v) restored (%d idmapped mounts)", i, own0.Output, own1.Output, err, idmapped)
		}
		// What the restored processes wrote is in their new root's upper
		// dir.
		if b, err := os.ReadFile(filepath.Join(root, "tmp", "py")); err != nil || !strings.HasPrefix(string(b), py0.token) {
			t.Errorf("restore %d: the new root's /tmp/py: %q, %v", i, b, err)
		}
	}
	// A restored supervisor ends its sandbox as any does: its processes
	// killed, then itself.
	for i, r := range restored {
		if err := wire.WriteFrame(r.Control, wire.Request{ID: 1 << 20, Op: wire.OpShutdown}); err != nil {
			t.Fatalf("restore %d: shutdown: %v", i, err)
		}
		var resp wire.Response
		if err := wire.ReadFrame(r.Control, &resp); err != nil || resp.Error != "" {
			t.Errorf("restore %d: shutdown answered %+v, %v", i, resp, err)
		}
		timer := time.AfterFunc(30*time.Second, func() { r.Process.Kill() })
		st, err := r.Process.Wait()
		timer.Stop()
		if err != nil || !st.Success() {
			t.Errorf("restore %d: its init after the shutdown: %v, %v (want exit 0 by itself)", i, st, err)
		}
	}
}

// createDumpable creates a sandbox whose control socket lies in its
// network namespace. One with a namespace of its own has that only when
// the namespace was made ahead (RuntimeOptions.NetSpares): the first
// create has the pool fill, so this creates again until one took a
// namespace made ahead.
func createDumpable(ctx context.Context, t *testing.T, rt *sandbox.Runtime, conf sandbox.Config) *sandbox.Sandbox {
	t.Helper()
	for range 100 {
		sb, err := rt.Create(ctx, conf)
		if err != nil {
			t.Fatal(err)
		}
		err = sameNetns(sb.InitPid(), 3)
		if err == nil {
			return sb
		}
		if !errors.Is(err, ErrControlOutside) {
			sb.Close()
			t.Fatal(err)
		}
		if err := sb.Close(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no sandbox of %d had its control socket in its network namespace (network %q)", 100, conf.Network)
	return nil
}

// TestDumpRefusesControlOutside: a sandbox whose init's clone made its
// network namespace (none made ahead: a runtime without NetSpares, or a
// burst) has its control socket in the host's, which CRIU cannot dump;
// Dump says so before CRIU freezes anything, and the sandbox runs on.
func TestDumpRefusesControlOutside(t *testing.T) {
	privtest.RequireRoot(t)
	criu := testCriu(t)
	rt, err := sandbox.NewRuntime(sandbox.RuntimeOptions{StateDir: privtest.StateDir(t), DiskDir: testDiskDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Errorf("closing the runtime: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := rt.Create(ctx, sandbox.Config{HostBase: true}) // network none
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	dir := t.TempDir()
	if _, err := criu.Dump(ctx, DumpOptions{Init: sb.InitPid(), Dir: dir}); !errors.Is(err, ErrControlOutside) {
		t.Fatalf("dump of a sandbox with its own network namespace: %v, want ErrControlOutside", err)
	}
	if res, err := sb.Exec(ctx, session.ExecRequest{Command: "echo alive", Timeout: 10 * time.Second}); err != nil || res.Output != "alive\n" {
		t.Errorf("the sandbox after the refused dump: %+v, %v", res, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		t.Errorf("the refused dump left %d files in its dir", len(ents))
	}
}

// netnsOf returns the inode of pid's network namespace.
func netnsOf(t *testing.T, pid int) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// newNetns makes a network namespace on a thread that then goes back to
// the host's. The thread must not end: a restored init's Pdeathsig follows
// the thread that ran its criu, which may be this one (see Restored).
func newNetns(t *testing.T) *os.File {
	t.Helper()
	type made struct {
		f   *os.File
		err error
	}
	c := make(chan made, 1)
	go func() {
		runtime.LockOSThread()
		host, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			c <- made{nil, err}
			return
		}
		defer host.Close()
		var f *os.File
		if err = unix.Unshare(unix.CLONE_NEWNET); err == nil {
			f, err = os.Open("/proc/thread-self/ns/net")
		}
		if berr := unix.Setns(int(host.Fd()), unix.CLONE_NEWNET); berr != nil {
			c <- made{nil, fmt.Errorf("%v; back to the host's: %w", err, berr)}
			select {} // parked, locked: it must not end, nor serve others
		}
		runtime.UnlockOSThread()
		c <- made{f, err}
	}()
	m := <-c
	if m.err != nil {
		t.Fatalf("making a network namespace: %v", m.err)
	}
	t.Cleanup(func() { m.f.Close() })
	return m.f
}

// nsInode returns the inode of the namespace file f.
func nsInode(t *testing.T, f *os.File) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

type counter struct {
	token string
	n     int
}

// newTestRuntime is a runtime with one network namespace made ahead (a
// sandbox on it can be dumped) and its state dir, closed at the test's
// end.
func newTestRuntime(t *testing.T, diskDir string) (*sandbox.Runtime, string) {
	t.Helper()
	state := privtest.StateDir(t)
	rt, err := sandbox.NewRuntime(sandbox.RuntimeOptions{StateDir: state, DiskDir: diskDir, NetSpares: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Errorf("closing the runtime: %v", err)
		}
	})
	return rt, state
}

// startCounter runs start, which leaves a counter running, in a session
// of sb named bg.
func startCounter(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, start string) {
	t.Helper()
	if err := sb.OpenSession(ctx, "bg", sandbox.SessionOptions{}); err != nil {
		t.Fatal(err)
	}
	if res, err := sb.SessionExec(ctx, "bg", session.ExecRequest{Command: start, Timeout: 10 * time.Second}); err != nil || res.ExitCode != 0 {
		t.Fatalf("starting the counter: %v %+v", err, res)
	}
}

// readCounter waits for file, where a counter writes "token n", to hold
// a number past after in sb.
func readCounter(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, file string, after int) counter {
	t.Helper()
	var res session.Result
	for range 500 {
		var err error
		res, err = sb.Exec(ctx, session.ExecRequest{Command: "cat " + file, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode == 0 && res.Output != "" {
			if c := parseCounter(t, res.Output); c.n > after {
				return c
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("sandbox %s: %s did not pass %d in 10 s: %+v", sb.ID, file, after, res)
	return counter{}
}

func parseCounter(t *testing.T, line string) counter {
	t.Helper()
	tok, n, ok := strings.Cut(strings.TrimSpace(line), " ")
	i, err := strconv.Atoi(n)
	if !ok || err != nil || tok == "" {
		t.Fatalf("counter line %q: want a token and a number", line)
	}
	return counter{tok, i}
}

// call runs cmd through a supervisor's control socket, as the host does.
func call(ctl *os.File, id uint64, cmd string) (session.Result, error) {
	exec := &session.ExecRequest{Command: cmd, Timeout: 10 * time.Second}
	if err := wire.WriteFrame(ctl, wire.Request{ID: id, Op: wire.OpExec, Exec: exec}); err != nil {
		return session.Result{}, fmt.Errorf("sending to the restored supervisor: %w", err)
	}
	var resp wire.Response
	if err := wire.ReadFrame(ctl, &resp); err != nil {
		return session.Result{}, fmt.Errorf("reading the restored supervisor's answer: %w", err)
	}
	if resp.ID != id || resp.Error != "" || resp.Result == nil {
		return session.Result{}, fmt.Errorf("the restored supervisor answered %+v", resp)
	}
	return *resp.Result, nil
}

// newRoot mounts an overlay of lower and a new upper dir, as a host-base
// sandbox's root is, and unmounts it after the test.
func newRoot(t *testing.T, lower string) string {
	t.Helper()
	d := t.TempDir()
	root, upper, work := filepath.Join(d, "root"), filepath.Join(d, "upper"), filepath.Join(d, "work")
	for _, p := range []string{root, upper, work} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work)
	if err := unix.Mount("overlay", root, "overlay", 0, opts); err != nil {
		t.Fatalf("mounting overlay %s on %s: %v", opts, root, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(root, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", root, err)
		}
	})
	return root
}

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// unmappedUserns makes a user namespace that maps only one id no file has,
// as the sandbox runtime's for idmapped host dirs.
func unmappedUserns(t *testing.T) *os.File {
	t.Helper()
	const unused = 4000000000
	cmd := exec.Command("sleep", "60")
	ids := []syscall.SysProcIDMap{{ContainerID: unused, HostID: unused, Size: 1}}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER, UidMappings: ids, GidMappings: ids}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	cmd.Process.Kill()
	cmd.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

// procCgroups returns the cgroups pid is in, besides the root ones: its
// path by hierarchy, as /proc/<pid>/cgroup names them.
func procCgroups(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 && f[2] != "/" {
			out[f[1]] = f[2]
		}
	}
	return out
}

// cgroupDir is the host dir of a cgroup of hierarchy ctl.
func cgroupDir(ctl, path string) string {
	if ctl == "" {
		if _, err := os.Stat("/sys/fs/cgroup/unified"); err == nil {
			return filepath.Join("/sys/fs/cgroup/unified", path)
		}
		return filepath.Join("/sys/fs/cgroup", path)
	}
	return filepath.Join("/sys/fs/cgroup", strings.TrimPrefix(ctl, "name="), path)
}

// removeCgroup removes a cgroup a restore made, once its processes are
// gone.
func removeCgroup(t *testing.T, ctl, path string) {
	t.Helper()
	dir := cgroupDir(ctl, path)
	var err error
	for range 100 {
		if err = os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("removing the restored cgroup %s: %v", dir, err)
}
