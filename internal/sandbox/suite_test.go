package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/cgroup"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/session"
	"golang.org/x/sys/unix"
)

// The suite runs as root and, re-executed by TestRootless as an
// unprivileged user, rootless; privilege skips go through privtest.Skip.

// wantCgroupEnv names the cgroup version ("v1", "v2") a rerun's runtimes
// must find by themselves; TestCgroupV2's guest sets it.
const wantCgroupEnv = "MSB_TEST_WANT_CGROUP"

func testRuntime(t testing.TB) *Runtime {
	t.Helper()
	return testRuntimeExe(t, "")
}

// testRuntimeExe is testRuntime with exe as every sandbox's init ("": this
// test binary).
func testRuntimeExe(t testing.TB, exe string) *Runtime {
	t.Helper()
	base := os.Getenv("MSB_TEST_STATE_BASE")
	if base == "" {
		base = os.TempDir()
	}
	dir, err := os.MkdirTemp(base, privtest.StatePrefix())
	if err != nil {
		t.Fatal(err)
	}
	delegated := os.Getenv("MSB_CGROUP_PARENT")
	rt, err := NewRuntime(RuntimeOptions{StateDir: dir, CgroupParent: delegated, Exe: exe, DiskDir: testDiskDir})
	if err != nil {
		t.Fatal(err)
	}
	if delegated != "" && !rt.cg.Usable() {
		t.Fatalf("MSB_CGROUP_PARENT=%s but no cgroup: %s", delegated, rt.cg.Reason)
	}
	if want := os.Getenv(wantCgroupEnv); want != "" && string(rt.cg.Version) != want {
		t.Fatalf("%s=%s but the runtime has cgroup %q (%s)", wantCgroupEnv, want, rt.cg.Version, rt.cg.Reason)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Errorf("closing the runtime: %v", err)
		}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if e.Name() != ".empty" && e.Name() != ".mnt" && !strings.HasPrefix(e.Name(), ".probed-") { // the runtime's own, made once
				t.Errorf("state dir %s still holds %s after the test", dir, e.Name())
			}
		}
		if rt.cg.Usable() {
			for _, p := range rt.cg.Parents {
				if ents, err := os.ReadDir(p); err == nil {
					for _, e := range ents {
						if e.IsDir() {
							if _, err := os.Stat(filepath.Join(dir, e.Name())); err == nil {
								t.Errorf("cgroup %s/%s left behind", p, e.Name())
							}
						}
					}
				}
			}
		}
		os.RemoveAll(dir)
	})
	return rt
}

func create(t testing.TB, rt *Runtime, spec Config) *Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := rt.Create(ctx, spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return sb
}

func sh(t testing.TB, sb *Sandbox, cmd string) session.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := sb.Exec(ctx, session.ExecRequest{Command: cmd, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return res
}

func mustOK(t testing.TB, sb *Sandbox, cmd string) string {
	t.Helper()
	res := sh(t, sb, cmd)
	if res.ExitCode != 0 {
		t.Fatalf("%q exited %d: %s", cmd, res.ExitCode, res.Output)
	}
	return res.Output
}

func mustFail(t testing.TB, sb *Sandbox, cmd string) string {
	t.Helper()
	res := sh(t, sb, cmd)
	if res.ExitCode == 0 {
		t.Fatalf("%q should have failed but exited 0: %s", cmd, res.Output)
	}
	return res.Output
}

// suiteCases are the suite's tests, each against one runtime.
var suiteCases = []struct {
	name string
	fn   func(*testing.T, *Runtime)
}{
	{"Basics", testBasics},
	{"User", testUser},
	{"UserHostKilled", testUserHostKilled},
	{"Sessions", testSessions},
	{"SessionInterrupt", testSessionInterrupt},
	{"Signals", testSignals},
	{"PIDNamespace", testPIDNamespace},
	{"NoHostNetwork", testNoHostNetwork},
	{"HostDirsReadOnly", testHostDirsReadOnly},
	{"SandboxesIsolated", testSandboxesIsolated},
	{"Escapes", testEscapes},
	{"Devices", testDevices},
	{"InitBornInCgroup", testInitBornInCgroup},
	{"ForkBomb", testForkBomb},
	{"MemoryBomb", testMemoryBomb},
	{"MemoryAcrossProcesses", testMemoryAcrossProcesses},
	{"SmallMemoryConcurrentExecs", testSmallMemoryConcurrentExecs},
	{"TmpQuota", testTmpQuota},
	{"TmpOnRoot", testTmpOnRoot},
	{"CloseKillsEverything", testCloseKillsEverything},
	{"BadInput", testBadInput},
	{"Files", testFiles},
	{"SymlinkEscape", testSymlinkEscape},
	{"Layers", testLayers},
	{"MountinfoHidesHostPaths", testMountinfoHidesHostPaths},
	{"KeepUpper", testKeepUpper},
	{"VolatileOnlyOnDisk", testVolatileOnlyOnDisk},
	{"CopyModeRoot", testCopyModeRoot},
	{"Concurrent", testConcurrent},
	{"GC", testGC},
	{"GCPidReused", testGCPidReused},
	{"GCOwnerRemoving", testGCOwnerRemoving},
	{"GCNewDirs", testGCNewDirs},
	{"CloseThenRuntimeClose", testCloseThenRuntimeClose},
	{"KilledDuringCleanup", testKilledDuringCleanup},
	{"DiskAdmittedClose", testDiskAdmittedClose},
	{"UpperHoldsOnlyWrites", testUpperHoldsOnlyWrites},
	{"ShellTTY", testShellTTY},
	{"ZombiesReaped", testZombiesReaped},
	{"IdleSupervisorFlat", testIdleSupervisorFlat},
	{"SupervisorTrims", testSupervisorTrims},
	{"SessionRenameClose", testSessionRenameClose},
	{"InheritedDescriptors", testInheritedDescriptors},
	{"StdioNotHostFile", testStdioNotHostFile},
	{"SupervisorUnreachable", testSupervisorUnreachable},
	{"SupervisorThreads", testSupervisorThreads},
	{"DiskLimit", testDiskLimit},
	{"HostSecrets", testHostSecrets},
	{"MemoryBoundWithoutCgroup", testMemoryBoundWithoutCgroup},
	{"StreamBackPressure", testStreamBackPressure},
	{"StreamCancelWaits", testStreamCancelWaits},
	{"ExecCancelWaits", testExecCancelWaits},
	{"SessionExecCancelWaits", testSessionExecCancelWaits},
	{"SessionCloseKillsEscapees", testSessionCloseKillsEscapees},
	{"InterruptWaits", testInterruptWaits},
	{"FreezeWritableDir", testFreezeWritableDir},
	{"HostNameResolves", testHostNameResolves},
	{"CgroupFS", testCgroupFS},
	{"NetworkInterface", testNetworkInterface},
	{"CallsShareTheReader", testCallsShareTheReader},
	{"Sudo", testSudo},
	{"SudoTerminal", testSudoTerminal},
}

func TestSuite(t *testing.T) {
	rt := testRuntime(t)
	t.Logf("mode %s, cgroup %+v", rt.Mode(), rt.cg)
	runSuite(t, rt, nil)
}

// runSuite runs the suite's cases named in only (all when only is nil)
// against rt.
func runSuite(t *testing.T, rt *Runtime, only []string) {
	for _, tc := range suiteCases {
		if only == nil || slices.Contains(only, tc.name) {
			t.Run(tc.name, func(t *testing.T) { tc.fn(t, rt) })
		}
	}
}

func testBasics(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true, Hostname: "box", Env: []string{"FOO=bar"}, Workdir: "/work"})
	if got := mustOK(t, sb, "id -u; hostname; echo $FOO; pwd"); got != "0\nbox\nbar\n/work\n" {
		t.Fatalf("got %q", got)
	}
	if res := sh(t, sb, "exit 7"); res.ExitCode != 7 {
		t.Fatalf("exit code %d, want 7", res.ExitCode)
	}
	if res := sh(t, sb, "no-such-command-xyz"); res.ExitCode != 127 {
		t.Fatalf("missing command exit %d, want 127", res.ExitCode)
	}
	// no_new_privs and seccomp are in force for the agent's processes.
	out := mustOK(t, sb, "grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status")
	if !strings.Contains(out, "NoNewPrivs:\t1") || !strings.Contains(out, "Seccomp:\t2") {
		t.Fatalf("status: %s", out)
	}
	// Dropped capabilities: CAP_SYS_ADMIN (bit 21) is not in the bounding set.
	capb := mustOK(t, sb, "grep CapBnd /proc/self/status | cut -f2")
	n, err := strconv.ParseUint(strings.TrimSpace(capb), 16, 64)
	if err != nil || n&(1<<21) != 0 {
		t.Fatalf("CapBnd %q still has CAP_SYS_ADMIN", capb)
	}
}

func testSessions(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	ctx := context.Background()
	if err := sb.OpenSession(ctx, "main", SessionOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sb.OpenSession(ctx, "main", SessionOptions{}); !errors.Is(err, ErrExists) {
		t.Fatalf("second open: %v, want ErrExists", err)
	}
	for _, c := range []string{"cd /tmp", "export X=42", "f() { echo hi $1; }"} {
		if _, err := sb.SessionExec(ctx, "main", session.ExecRequest{Command: c}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := sb.SessionExec(ctx, "main", session.ExecRequest{Command: "pwd; echo $X; f there"})
	if err != nil || res.Output != "/tmp\n42\nhi there\n" {
		t.Fatalf("state not kept: %q %v", res.Output, err)
	}
	res, err = sb.SessionExec(ctx, "main", session.ExecRequest{Command: "sleep 30", Timeout: 200 * time.Millisecond})
	if err != nil || !res.TimedOut {
		t.Fatalf("timeout: %+v %v", res, err)
	}
	res, err = sb.SessionExec(ctx, "main", session.ExecRequest{Command: "echo $X"})
	if err != nil || res.Output != "42\n" {
		t.Fatalf("session unusable after timeout: %+v %v", res, err)
	}
	res, err = sb.SessionExec(ctx, "main", session.ExecRequest{Command: "exit 3"})
	if err != nil || !res.SessionEnded || res.ExitCode != 3 {
		t.Fatalf("exit: %+v %v", res, err)
	}
	if _, err := sb.SessionExec(ctx, "main", session.ExecRequest{Command: "true"}); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("exec after exit: %v, want ErrSessionEnded", err)
	}
	if err := sb.OpenSession(ctx, "main", SessionOptions{}); err != nil {
		t.Fatalf("reopen after exit: %v", err)
	}
	if _, err := sb.SessionExec(ctx, "nope", session.ExecRequest{Command: "true"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
}

func testPIDNamespace(t *testing.T, rt *Runtime) {
	host := exec.Command("sleep", "300")
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { host.Process.Kill(); host.Wait() }()
	sb := create(t, rt, Config{HostBase: true})
	out := mustOK(t, sb, "ls /proc | grep -cE '^[0-9]+$'")
	if n, _ := strconv.Atoi(strings.TrimSpace(out)); n > 6 {
		t.Fatalf("sandbox sees %d processes", n)
	}
	sh(t, sb, fmt.Sprintf("kill -9 %d; kill -9 -1", host.Process.Pid))
	time.Sleep(50 * time.Millisecond)
	if err := host.Process.Signal(os.Signal(nil)); err != nil && !strings.Contains(err.Error(), "unsupported") {
		t.Fatalf("host process affected: %v", err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", host.Process.Pid)); err != nil {
		t.Fatal("host process was killed from inside the sandbox")
	}
}

func testNoHostNetwork(t *testing.T, rt *Runtime) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	sb := create(t, rt, Config{HostBase: true})
	mustFail(t, sb, fmt.Sprintf("timeout 5 bash -c 'echo hi > /dev/tcp/127.0.0.1/%d'", port))
	// Loopback inside works.
	mustOK(t, sb, `python3 -c "
import socket
s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()
c = socket.create_connection(s.getsockname()); print('ok')"`)
}

func testHostDirsReadOnly(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	for _, c := range []string{"touch /usr/msb-test", "echo x >> /etc/passwd", "touch /etc/msb-test", "rm -f /bin/sh"} {
		mustFail(t, sb, c)
	}
	for _, p := range []string{"/usr/msb-test", "/etc/msb-test"} {
		if _, err := os.Stat(p); err == nil {
			t.Fatalf("%s appeared on the host", p)
		}
	}
	if rt.Rootless() {
		return
	}
	if out := sh(t, sb, "cat /etc/shadow").Output; strings.Contains(out, "root:") {
		t.Fatalf("/etc/shadow readable: %q", out)
	}
}

func testSandboxesIsolated(t *testing.T, rt *Runtime) {
	a := create(t, rt, Config{HostBase: true})
	b := create(t, rt, Config{HostBase: true})
	mustOK(t, a, "echo secret-a > /tmp/a; echo secret-a > /root-a-file")
	if out := sh(t, b, "cat /tmp/a /root-a-file; ls /proc/*/root/tmp 2>&1; find / -xdev -name root-a-file 2>/dev/null").Output; strings.Contains(out, "secret-a") || strings.Contains(out, "root-a-file\n") {
		t.Fatalf("sandbox b sees a's files: %q", out)
	}
	if out := sh(t, b, "ls "+rt.stateDir+" 2>&1").Output; strings.Contains(out, a.ID) {
		t.Fatalf("state dir visible: %q", out)
	}
}

func testEscapes(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	marker := filepath.Join(os.TempDir(), "msb-escape-marker-"+sb.ID)
	os.WriteFile(marker, []byte("host"), 0o644)
	defer os.Remove(marker)
	for _, c := range []string{
		"python3 -c 'import os; os.chroot(\"/tmp\")'",
		"mount -t tmpfs none /mnt",
		"unshare -m true",
		"unshare -U true",
		"cat " + marker,
		"cat /proc/1/root" + marker,
		"echo x > /proc/self/exe",
		// Where the kernel has the file, /dev/null masks it: a write
		// succeeds and reaches nothing. What must fail is a write to
		// anything else there.
		`[ "$(stat -L -c %t:%T /proc/sysrq-trigger 2>/dev/null)" != 1:3 ] && echo x > /proc/sysrq-trigger`,
		"echo 1 > /proc/sys/kernel/sysrq",
	} {
		t.Run(c, func(t *testing.T) {
			out := mustFail(t, sb, c)
			if strings.Contains(out, "host") && strings.Contains(c, marker) {
				t.Fatalf("read host file: %q", out)
			}
		})
	}
	// A classic chroot escape: chroot into a subdir then cd .. many times.
	out := sh(t, sb, `python3 - <<'EOF'
import os
try:
    os.makedirs("/tmp/j", exist_ok=True); fd = os.open("/", os.O_RDONLY); os.chroot("/tmp/j")
    os.fchdir(fd)
    for _ in range(64): os.chdir("..")
    os.chroot("."); print(open("`+marker+`").read())
except OSError as e: print("blocked", e)
EOF`).Output
	if !strings.Contains(out, "blocked") {
		t.Fatalf("chroot escape: %q", out)
	}
	// No descriptor of msb's leaks into the sandbox: only 0, 1, 2 and the
	// one ls opens.
	fds := mustOK(t, sb, "ls -l /proc/self/fd/ | grep -c -- '->' ; ls -l /proc/self/fd/ | grep -E 'socket|pipe' || true")
	if strings.Contains(fds, "socket") {
		t.Fatalf("a socket leaked into the sandbox: %s", fds)
	}
}

func testDevices(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	out := mustOK(t, sb, "ls /dev | sort | tr '\\n' ' '")
	for _, d := range strings.Fields(out) {
		switch d {
		case "null", "zero", "full", "random", "urandom", "tty", "pts", "ptmx", "shm", "fd", "stdin", "stdout", "stderr":
		default:
			t.Errorf("unexpected /dev/%s", d)
		}
	}
	mustOK(t, sb, "head -c 16 /dev/urandom | wc -c; echo x > /dev/null; test -c /dev/pts/ptmx")
	mustFail(t, sb, "mknod /tmp/sda b 8 0")
	mustFail(t, sb, "ls /dev/vda /dev/sda /dev/nvme0n1 /dev/mem 2>&1")
	mustFail(t, sb, "echo x > /dev/full")
}

// testInitBornInCgroup: a sandbox's init is in the sandbox's cgroup. On
// v2 (with clone3) it is cloned there (CLONE_INTO_CGROUP), on v1 as root
// forked from a thread that moved itself there (cgroup.StartInside): no
// attach phase, whose move waits for an RCU grace period; on v1 rootless
// it is moved there.
func testInitBornInCgroup(t *testing.T, rt *Runtime) {
	if !rt.cg.Usable() {
		t.Skip("no cgroup: " + rt.cg.Reason)
	}
	if want := rt.cg.Version == cgroup.V2 && cgroup.CloneIntoSupported(); rt.cloneInto != want {
		t.Fatalf("cloneInto %v on cgroup %s", rt.cloneInto, rt.cg.Version)
	}
	if want := rt.cg.Version == cgroup.V1 && !rt.rootless; rt.forkInside != want {
		t.Fatalf("forkInside %v on cgroup %s, rootless %v", rt.forkInside, rt.cg.Version, rt.rootless)
	}
	sb := create(t, rt, Config{HostBase: true, Limits: Limits{Pids: 64}})
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", sb.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range sb.cg.Dirs() {
		if !strings.Contains(string(b), ":"+strings.TrimPrefix(d, cgroupMount(d))+"\n") {
			t.Errorf("init's cgroups %q lack %s", b, d)
		}
	}
	attached := slices.ContainsFunc(sb.Timings(), func(p Phase) bool { return p.Name == PhaseAttach })
	if born := rt.cloneInto || rt.forkInside; attached == born {
		t.Errorf("born in its cgroup (cloned %v, forked from inside %v), but an attach phase: %v (%v)",
			rt.cloneInto, rt.forkInside, attached, sb.Timings())
	}
	// The thread init was forked from went back: no thread of this process
	// is in the sandbox's groups.
	for _, d := range sb.cg.Dirs() {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if procs := strings.Fields(string(b)); err != nil || slices.Contains(procs, strconv.Itoa(os.Getpid())) || !slices.Contains(procs, strconv.Itoa(sb.cmd.Process.Pid)) {
			t.Errorf("%s/cgroup.procs: %q (%v), want init %d and not this process %d", d, b, err, sb.cmd.Process.Pid, os.Getpid())
		}
	}
}

// cgroupMount is the mount of the hierarchy a cgroup directory is in, as
// /proc/PID/cgroup's paths are relative to it.
func cgroupMount(dir string) string {
	for _, m := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids",
		"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/freezer", "/sys/fs/cgroup"} {
		if strings.HasPrefix(dir, m+"/") {
			return m
		}
	}
	return ""
}

func testForkBomb(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true, Limits: Limits{Pids: 64}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := sb.Exec(ctx, session.ExecRequest{Command: `bomb() { bomb | bomb & }; bomb 2>/dev/null; sleep 2`, Timeout: 10 * time.Second})
	t.Logf("fork bomb: exit %d, timed out %v, err %v", res.ExitCode, res.TimedOut, err)
	// The host still forks, and the sandbox answers once the bomb is gone.
	if err := exec.Command("true").Run(); err != nil {
		t.Fatalf("host cannot fork: %v", err)
	}
	if u, err := sb.Usage(); err == nil {
		t.Logf("usage after bomb: %+v", u)
		if u.Pids > 64 {
			t.Fatalf("pids %d over the limit of 64", u.Pids)
		}
		if u.PidsLimitHits == 0 {
			t.Fatalf("the bomb never reached the pids limit: %+v", u)
		}
	} else if !rt.Rootless() {
		t.Fatal(err)
	}
	mustOK(t, sb, "echo alive")
}

// testSmallMemoryConcurrentExecs: under a small memory limit many commands
// start at once and every one runs. Rootless, each goes through the rlimit
// wrapper, a Go process whose address space is far above the RLIMIT_AS it
// sets: it must not allocate once the limit is set.
func testSmallMemoryConcurrentExecs(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true, Limits: Limits{MemoryBytes: 32 << 20}})
	const n = 24
	errs := make(chan string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := sb.Exec(ctx, session.ExecRequest{Command: fmt.Sprintf("echo run-%d", i), Timeout: 30 * time.Second})
			if err != nil || res.ExitCode != 0 || strings.TrimSpace(res.Output) != fmt.Sprintf("run-%d", i) {
				errs <- fmt.Sprintf("exec %d: err %v, exit %d, output %q", i, err, res.ExitCode, res.Output)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func testMemoryBomb(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true, Limits: Limits{MemoryBytes: 128 << 20}})
	res := sh(t, sb, `python3 -c "
b = []
for i in range(64): b.append(bytearray(16 << 20))
print('allocated 1 GiB')"`)
	if res.ExitCode == 0 || strings.Contains(res.Output, "allocated") {
		t.Fatalf("memory bomb not stopped: exit %d %q", res.ExitCode, res.Output)
	}
	if u, err := sb.Usage(); err == nil {
		t.Logf("usage after bomb: %+v (exit %d)", u, res.ExitCode)
		if u.MemoryPeakBytes > 140<<20 {
			t.Fatalf("memory peak %d over the limit", u.MemoryPeakBytes)
		}
		if u.OOMKills == 0 {
			t.Fatalf("the bomb was stopped but no OOM kill was reported: %+v", u)
		}
	}
	mustOK(t, sb, "echo still alive")
}

// testMemoryAcrossProcesses: the memory limit bounds a sandbox's processes
// together (six of 40 MiB under 128 MiB), where a cgroup holds it; rlimits
// bound each process alone (see "Rootless limits" in docs/sandbox.md).
func testMemoryAcrossProcesses(t *testing.T, rt *Runtime) {
	if !rt.cg.Usable() {
		t.Skip("no cgroup: RLIMIT_AS bounds each process, not the sandbox")
	}
	sb := create(t, rt, Config{HostBase: true, Limits: Limits{MemoryBytes: 128 << 20}})
	hold := `python3 -c "import time; b = b'x' * (40 << 20); time.sleep(3); print('kept', len(b) >> 20)"`
	out := mustOK(t, sb, "for i in 1 2 3 4 5 6; do "+hold+" & done; wait; echo done")
	kept := 0
	for _, line := range strings.Split(out, "\n") {
		if line == "kept 40" {
			kept++
		}
	}
	if kept > 3 || !strings.HasSuffix(out, "done\n") {
		t.Fatalf("%d processes kept 40 MiB each under a 128 MiB limit: %q", kept, out)
	}
	u, err := sb.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if u.OOMKills == 0 || u.MemoryPeakBytes > 140<<20 {
		t.Fatalf("usage %+v: want OOM kills and a peak within the limit", u)
	}
}

// testTmpQuota: a sandbox whose writable tree is a host directory (here
// kept, KeepUpper) has no disk to hold its /tmp, which is then a tmpfs of
// TmpBytes; with a disk, /tmp shares its limit (testDiskLimit).
func testTmpQuota(t *testing.T, rt *Runtime) {
	sb := createKeptUpper(t, rt, Limits{TmpBytes: 8 << 20})
	out := mustFail(t, sb, "dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>&1")
	if !strings.Contains(out, "No space left") {
		t.Fatalf("want ENOSPC, got %q", out)
	}
}

func testCloseKillsEverything(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	tag := strconv.Itoa(1000000 + int(time.Now().UnixNano()%1000000))
	ctx := context.Background()
	if err := sb.OpenSession(ctx, "s", SessionOptions{}); err != nil {
		t.Fatal(err)
	}
	cmds := fmt.Sprintf("sleep %s.1 & nohup sleep %s.2 >/dev/null 2>&1 & setsid sleep %s.3 & (sleep %s.4 &) ; disown -a", tag, tag, tag, tag)
	if _, err := sb.SessionExec(ctx, "s", session.ExecRequest{Command: cmds}); err != nil {
		t.Fatal(err)
	}
	mustOK(t, sb, "setsid -f sleep "+tag+".5 >/dev/null 2>&1")
	// A command still running in a second session when Close comes (the
	// shutdown closes sessions whose shells it has killed): its exec
	// returns, and it is gone too.
	if err := sb.OpenSession(ctx, "fg", SessionOptions{}); err != nil {
		t.Fatal(err)
	}
	fg := make(chan error, 1)
	go func() {
		_, err := sb.SessionExec(ctx, "fg", session.ExecRequest{Command: "sleep " + tag + ".6"})
		fg <- err
	}()
	// The background sleeps and the foreground one running, however slow
	// the machine (a VM of TestCgroupV2 took more than 100 ms).
	for deadline := time.Now().Add(10 * time.Second); countProcs("sleep "+tag) < 5; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("expected background and foreground sleeps to run, found %d", countProcs("sleep "+tag))
		}
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if n := countProcs("sleep " + tag); n != 0 {
		t.Fatalf("%d of the sandbox's processes survived close", n)
	}
	if err := <-fg; err == nil {
		t.Fatal("a session command running at Close returned no error")
	}
}

// stateTree lists the paths under a runtime's state dir, two levels deep.
func stateTree(dir string) string {
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		if err == nil && strings.Count(rel, "/") < 2 {
			fmt.Fprintf(&b, "%s %v\n", rel, d.Type())
		}
		if d != nil && d.IsDir() && strings.Count(rel, "/") >= 1 {
			return fs.SkipDir
		}
		return nil
	})
	return b.String()
}

func countProcs(cmdline string) int {
	n := 0
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		b, err := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), cmdline) {
			n++
		}
	}
	return n
}

func testBadInput(t *testing.T, rt *Runtime) {
	for _, tc := range []struct {
		name string
		spec Config
		want string
	}{
		{"no root", Config{}, "no root"},
		{"missing layer", Config{Layers: []string{"/nonexistent/layer"}}, "no such file"},
		{"relative layer", Config{Layers: []string{"rel/layer"}}, "not an absolute path"},
		{"relative workdir", Config{HostBase: true, Workdir: "work"}, "not an absolute path"},
		{"negative memory", Config{HostBase: true, Limits: Limits{MemoryBytes: -1}}, "negative limit"},
		{"tiny memory", Config{HostBase: true, Limits: Limits{MemoryBytes: 1024}}, "below"},
		{"negative disk", Config{HostBase: true, Limits: Limits{DiskBytes: -1}}, "negative limit"},
		{"tiny disk", Config{HostBase: true, Limits: Limits{DiskBytes: 1024}}, "disk limit"},
		{"bad network", Config{HostBase: true, Network: "bridge"}, "network"},
		{"bad env", Config{HostBase: true, Env: []string{"NOEQUALS"}}, "NAME=value"},
		{"missing bind", Config{HostBase: true, Binds: []Bind{{Source: "/nonexistent", Target: "/x"}}}, "bind source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rt.Create(context.Background(), tc.spec)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidSpec mentioning %q", err, tc.want)
			}
		})
	}
	// A failure inside the sandbox's init (binding a directory over a file
	// of a layer) comes back with the init's reason, and nothing is left.
	layer := t.TempDir()
	os.Chmod(layer, 0o755)
	os.WriteFile(filepath.Join(layer, "x"), []byte("file"), 0o644)
	_, err := rt.Create(context.Background(), Config{Layers: []string{layer}, Binds: []Bind{{Source: t.TempDir(), Target: "/x"}}})
	if err == nil || !strings.Contains(err.Error(), "sandbox setup") || !strings.Contains(err.Error(), "mount") {
		t.Fatalf("init failure: %v", err)
	}
	sb := create(t, rt, Config{HostBase: true})
	if code, err := sb.Run(context.Background(), []string{"/no/such/binary"}); !errors.Is(err, ErrNotFound) || code != 127 {
		t.Fatalf("run of missing binary: %d %v", code, err)
	}
}

func testFiles(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	ctx := context.Background()
	data := []byte("hello\x00\xff world\n")
	if err := sb.WriteFile(ctx, "/work/dir/f.bin", data, 0o640); err != nil {
		t.Fatal(err)
	}
	got, err := sb.ReadFile(ctx, "/work/dir/f.bin", 0)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %q %v", got, err)
	}
	if out := mustOK(t, sb, "stat -c %a /work/dir/f.bin"); out != "640\n" {
		t.Fatalf("mode %q", out)
	}
	ents, err := sb.ListDir(ctx, "/work/dir")
	if err != nil || len(ents) != 1 || ents[0].Name != "f.bin" || ents[0].Size != int64(len(data)) {
		t.Fatalf("list: %+v %v", ents, err)
	}
	if _, err := sb.ReadFile(ctx, "/nope", 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing file: %v", err)
	}
	if err := sb.WriteFile(ctx, "relative", nil, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("relative path: %v", err)
	}
	// tar round trip, including a hostile entry name.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, body := range map[string]string{"a/b.txt": "B", "../../evil.txt": "E", "/abs.txt": "A"} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	if err := sb.PutTar(ctx, "/up", buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	if out := mustOK(t, sb, "cd /up && find . -type f | sort | tr '\\n' ' '"); out != "./a/b.txt ./abs.txt ./evil.txt " {
		t.Fatalf("unpacked %q", out)
	}
	tb, err := sb.GetTar(ctx, "/up")
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(tb))
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	if len(names) != 5 {
		t.Fatalf("tar entries %v", names)
	}
}

func testSymlinkEscape(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	ctx := context.Background()
	host := filepath.Join(os.TempDir(), "msb-host-secret-"+sb.ID)
	if err := os.WriteFile(host, []byte("HOST SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(host)
	mustOK(t, sb, fmt.Sprintf("mkdir -p /tmp/x && ln -s %s /tmp/x/link && ln -s ../../../../../../%s /tmp/x/rel && ln -s /proc/self/root /tmp/x/pr", host, host))
	for _, p := range []string{"/tmp/x/link", "/tmp/x/rel", "/proc/self/root" + host, "/tmp/x/pr" + host, "/proc/1/root/etc/hostname"} {
		got, err := sb.ReadFile(ctx, p, 0)
		if bytes.Contains(got, []byte("HOST SECRET")) {
			t.Fatalf("%s read the host file", p)
		}
		if err == nil && !strings.HasPrefix(p, "/proc/1") {
			t.Fatalf("%s: want an error, got %q", p, got)
		}
	}
	// Writing through a planted symlink stays inside the sandbox.
	if err := sb.WriteFile(ctx, "/tmp/x/link", []byte("pwned"), 0o644); err == nil {
		if b, _ := os.ReadFile(host); string(b) != "HOST SECRET" {
			t.Fatal("host file overwritten through a symlink")
		}
	}
	if b, _ := os.ReadFile(host); string(b) != "HOST SECRET" {
		t.Fatal("host file overwritten through a symlink")
	}
}

func testLayers(t *testing.T, rt *Runtime) {
	base := t.TempDir()
	top := t.TempDir()
	os.Chmod(base, 0o755)
	os.Chmod(top, 0o755)
	os.WriteFile(filepath.Join(base, "f"), []byte("base\n"), 0o644)
	os.WriteFile(filepath.Join(base, "g"), []byte("base-g\n"), 0o644)
	os.WriteFile(filepath.Join(top, "f"), []byte("top\n"), 0o644)
	sb := create(t, rt, Config{HostBase: true, Layers: []string{base, top}, Binds: []Bind{{Source: top, Target: "/mnt/top", ReadOnly: true}}})
	if out := mustOK(t, sb, "cat /f /g; echo new > /g; cat /g; cat /mnt/top/f"); out != "top\nbase-g\nnew\ntop\n" {
		t.Fatalf("got %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(base, "g")); string(b) != "base-g\n" {
		t.Fatal("write reached the lower layer")
	}
	mustFail(t, sb, "echo x > /mnt/top/f")
}

// testMountinfoHidesHostPaths: the root overlay's options, which the agent
// reads in /proc/self/mountinfo, name its layers and writable dirs by
// descriptor, not by their host paths (the cache's, the state dir's).
func testMountinfoHidesHostPaths(t *testing.T, rt *Runtime) {
	base, top := t.TempDir(), t.TempDir()
	os.Chmod(base, 0o755)
	os.Chmod(top, 0o755)
	sb := create(t, rt, Config{HostBase: true, Layers: []string{base, top}})
	out := mustOK(t, sb, "cat /proc/self/mountinfo")
	for _, p := range []string{rt.StateDir(), base, top} {
		if strings.Contains(out, p) {
			t.Errorf("mountinfo shows the host path %s:\n%s", p, out)
		}
	}
	if !strings.Contains(out, "lowerdir=/proc/self/fd/") {
		t.Errorf("no overlay named by descriptors in:\n%s", out)
	}
}

// createKeptUpper is a host-base sandbox of limits whose writable tree is a
// host directory (KeepUpper), so it has no disk; closed and its tree
// removed at the test's end.
func createKeptUpper(t *testing.T, rt *Runtime, limits Limits) *Sandbox {
	t.Helper()
	sb, err := rt.Create(context.Background(), Config{HostBase: true, KeepUpper: true, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		RemoveAll(sb.UpperDir())
	})
	return sb
}

func testKeepUpper(t *testing.T, rt *Runtime) {
	sb, err := rt.Create(context.Background(), Config{HostBase: true, KeepUpper: true})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, sb, "echo kept > /kept.txt")
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	defer RemoveAll(sb.UpperDir())
	if b, err := os.ReadFile(filepath.Join(sb.UpperDir(), "kept.txt")); err != nil || string(b) != "kept\n" {
		t.Fatalf("kept upper: %q %v", b, err)
	}
}

// testVolatileOnlyOnDisk: the root overlay of a sandbox whose upper dir is
// on its own disk (deleted with it) skips syncs of that disk (overlayfs's
// volatile, so the teardown does not sync the disk pool), and still reads
// back what it wrote; an upper dir kept on the host (KeepUpper) is synced as
// before.
func testVolatileOnlyOnDisk(t *testing.T, rt *Runtime) {
	const rootLine = `awk '$5 == "/" {print}' /proc/self/mountinfo`
	sb := create(t, rt, Config{HostBase: true})
	if line := mustOK(t, sb, rootLine); !strings.Contains(line, "volatile") {
		t.Errorf("the root overlay on the sandbox's disk is not volatile: %s", line)
	}
	if out := mustOK(t, sb, "echo written > /w.txt && sync && cat /w.txt"); out != "written\n" {
		t.Errorf("read back %q after sync", out)
	}
	kept, err := rt.Create(context.Background(), Config{HostBase: true, KeepUpper: true})
	if err != nil {
		t.Fatal(err)
	}
	line := mustOK(t, kept, rootLine)
	if err := kept.Close(); err != nil {
		t.Fatal(err)
	}
	RemoveAll(kept.UpperDir())
	if strings.Contains(line, "volatile") {
		t.Errorf("the root overlay of a kept upper dir is volatile: %s", line)
	}
}

func testConcurrent(t *testing.T, rt *Runtime) {
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sb, err := rt.Create(context.Background(), Config{HostBase: true})
			if err != nil {
				errs <- err
				return
			}
			defer sb.Close()
			res, err := sb.Exec(context.Background(), session.ExecRequest{Command: fmt.Sprintf("echo %d", i)})
			if err != nil || res.Output != fmt.Sprintf("%d\n", i) {
				errs <- fmt.Errorf("sandbox %d: %q %v", i, res.Output, err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// testGC simulates a killed msb: a sandbox whose owner lock is released
// without Close. GC must kill its processes and remove its state.
func testGC(t *testing.T, rt *Runtime) {
	sb, err := rt.Create(context.Background(), Config{HostBase: true})
	if err != nil {
		t.Fatal(err)
	}
	tag := strconv.Itoa(2000000 + int(time.Now().UnixNano()%1000000))
	mustOK(t, sb, "setsid -f sleep "+tag+" >/dev/null 2>&1")
	sb.lock.Close() // the owner "dies"
	before := stateTree(rt.StateDir())
	rep := rt.GC()
	if len(rep.Sandboxes) != 1 || len(rep.Processes) != 1 {
		// Once (make test beside a validation run) GC found two more
		// sandboxes, of earlier subtests; what their dirs held says why.
		t.Fatalf("gc report %+v; the state dir before GC (this sandbox %s):\n%s", rep, sb.ID, before)
	}
	if n := countProcs("sleep " + tag); n != 0 {
		t.Fatalf("gc left %d processes", n)
	}
	sb.lock = nil
	sb.dir = ""
	sb.cg = nil
	sb.Close()
}

// testShellTTY drives an interactive shell through a real pty, as msb shell
// does with the user's terminal.
func testShellTTY(t *testing.T, rt *Runtime) {
	master, slave := openTestPty(t)
	defer master.Close()
	defer slave.Close() // the sandbox relays to it until Close
	sb := create(t, rt, Config{HostBase: true, Stdio: &Stdio{In: slave, Out: slave, Err: slave}})
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := sb.Shell(context.Background(), []string{"/bin/bash", "--norc", "-i"}, 30, 100)
		done <- result{code, err}
	}()
	var out bytes.Buffer
	go io.Copy(&out, master)
	master.Write([]byte("echo size=$(stty size) answer=$((6*7)); tty; exit 5\n"))
	select {
	case r := <-done:
		if r.err != nil || r.code != 5 {
			t.Fatalf("shell: code %d, err %v; output %q", r.code, r.err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("shell did not exit; output %q", out.String())
	}
	time.Sleep(50 * time.Millisecond)
	if got := out.String(); !strings.Contains(got, "size=30 100 answer=42") || !strings.Contains(got, "/dev/pts/") {
		t.Fatalf("output %q", got)
	}
}

func openTestPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	fd, _, e := unix.Syscall(unix.SYS_IOCTL, m.Fd(), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY)
	if e != 0 {
		t.Fatal(e)
	}
	return m, os.NewFile(fd, "pty")
}

// testZombiesReaped leaves orphans that exit, and zombies whose parent
// never waited and then exited (the kernel hands them to init already
// dead); the sandbox's init reaps both, on SIGCHLD alone.
func testZombiesReaped(t *testing.T, rt *Runtime) {
	sb := create(t, rt, Config{HostBase: true})
	ctx := context.Background()
	if err := sb.OpenSession(ctx, "z", SessionOptions{}); err != nil {
		t.Fatal(err)
	}
	orphans := "for i in 1 2 3 4 5 6 7 8; do (sleep 0.05 &); done; " +
		"for i in 1 2 3 4; do (sh -c 'true & exec sleep 0.2' &); done"
	if _, err := sb.SessionExec(ctx, "z", session.ExecRequest{Command: orphans}); err != nil {
		t.Fatal(err)
	}
	count := "cat /proc/[0-9]*/stat 2>/dev/null | awk '$3 == \"Z\"' | wc -l"
	for i := 0; i < 50; i++ {
		time.Sleep(100 * time.Millisecond)
		res, err := sb.SessionExec(ctx, "z", session.ExecRequest{Command: count})
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(res.Output) == "0" {
			return
		}
	}
	t.Fatal("zombies were never reaped")
}

// testCopyModeRoot uses a private directory as the root, as copy mode does
// on hosts without overlayfs: writes land in the directory itself.
func testCopyModeRoot(t *testing.T, rt *Runtime) {
	root := t.TempDir()
	os.Chmod(root, 0o755)
	os.WriteFile(filepath.Join(root, "seed"), []byte("seed\n"), 0o644)
	sb := create(t, rt, Config{RootDir: root, HostBase: true})
	if out := mustOK(t, sb, "cat /seed; echo written > /out; ls /usr/bin/env"); out != "seed\n/usr/bin/env\n" {
		t.Fatalf("got %q", out)
	}
	if b, err := os.ReadFile(filepath.Join(root, "out")); err != nil || string(b) != "written\n" {
		t.Fatalf("write did not land in the root dir: %q %v", b, err)
	}
	if _, err := rt.Create(context.Background(), Config{RootDir: root, Layers: []string{root}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("root dir with layers: %v", err)
	}
}
