package sandbox

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/minisandbox/msb/internal/cgroup"
	"github.com/minisandbox/msb/internal/privtest"
)

// helperInterfaces makes the test binary, run inside a sandbox, print what
// Go's net.Interfaces lists there (see printInterfaces).
const helperInterfaces = "interfaces"

// printInterfaces prints one line per interface: its name, flags and
// addresses, separated by tabs, as Go's net package sees them.
func printInterfaces() error {
	ifs, err := net.Interfaces()
	if err != nil {
		return err
	}
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			return err
		}
		fmt.Printf("%s\t%s\t%v\n", ifc.Name, ifc.Flags, addrs)
	}
	return nil
}

// testCgroupFS: a sandbox sees its own cgroup at /sys/fs/cgroup, as a
// container does (its memory limit there), and can change none of it.
func testCgroupFS(t *testing.T, rt *Runtime) {
	const limit = 256 << 20
	l := Limits{MemoryBytes: limit}
	hasCPU := slices.Contains(rt.cg.Controllers, "cpu")
	if hasCPU {
		// Above one CPU, so that the one-process commands below are never
		// throttled: in TestCgroupV2's emulated VM on a busy host, a
		// guest's CPU time includes the time the host did not run it, and
		// a quota of half a CPU slowed this case to a crawl.
		l.CPUs = 1.5
	}
	sb := create(t, rt, Config{HostBase: true, Limits: l})
	if got := strings.TrimSpace(mustOK(t, sb, "stat -f -c %T /sys")); got != "sysfs" {
		t.Errorf("/sys is a %q, want a sysfs", got)
	}
	// Root's file on the host, which a read-only mount alone keeps the
	// sandbox's root (CAP_DAC_OVERRIDE) from writing.
	if fileExists("/sys/kernel/mm/transparent_hugepage/enabled") {
		mustFail(t, sb, "cat /sys/kernel/mm/transparent_hugepage/enabled > /sys/kernel/mm/transparent_hugepage/enabled")
	}
	// With the host's network, a rootless sandbox may not mount a sysfs
	// (the namespace is not its user namespace's): a tmpfs stands in.
	want := "sysfs"
	if rt.rootless {
		want = "tmpfs"
	}
	hostNet := create(t, rt, Config{HostBase: true, Network: NetworkHost})
	if got := strings.TrimSpace(mustOK(t, hostNet, "stat -f -c %T /sys; test -d /sys/fs/cgroup")); got != want {
		t.Errorf("/sys with the host's network is a %q, want a %s", got, want)
	}
	if !rt.cg.Usable() {
		// No cgroup of its own: nothing to show, and nothing shown.
		if got := strings.TrimSpace(mustOK(t, sb, "ls -A /sys/fs/cgroup")); got != "" {
			t.Fatalf("/sys/fs/cgroup of a sandbox without a cgroup holds %q", got)
		}
		return
	}
	var memFile, hostMemFile, cpuFile, wantCPU, fsDir, fsType, self string
	if rt.cg.Version == cgroup.V2 {
		memFile, cpuFile, wantCPU = "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/cpu.max", "150000 100000"
		fsDir, fsType, self = "/sys/fs/cgroup", "cgroup2fs", "0::/"
	} else {
		memFile, cpuFile, wantCPU = "/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "150000"
		fsDir, fsType, self = "/sys/fs/cgroup/memory", "cgroupfs", ":memory:/"
	}
	for _, d := range sb.cg.Dirs() {
		if f := filepath.Join(d, filepath.Base(memFile)); fileExists(f) {
			hostMemFile = f
		}
	}
	if got := strings.TrimSpace(mustOK(t, sb, "cat "+memFile)); got != strconv.Itoa(limit) {
		t.Errorf("%s in the sandbox: %q, want %d", memFile, got, limit)
	}
	if hasCPU {
		if got := strings.TrimSpace(mustOK(t, sb, "cat "+cpuFile)); got != wantCPU {
			t.Errorf("%s in the sandbox: %q, want %q", cpuFile, got, wantCPU)
		}
	}
	if got := strings.TrimSpace(mustOK(t, sb, "stat -f -c %T "+fsDir)); got != fsType {
		t.Errorf("%s is a %q, want %q", fsDir, got, fsType)
	}
	// Its own group is the top of what it sees.
	if got := mustOK(t, sb, "cat /proc/self/cgroup"); !strings.Contains(got, self+"\n") && !strings.HasSuffix(got, self) {
		t.Errorf("/proc/self/cgroup %q lacks %q", got, self)
	}
	for _, attack := range []string{
		"echo 1073741824 > " + memFile,
		"echo max > " + memFile,
		"mkdir " + filepath.Join(fsDir, "escape"),
		"echo $$ > " + filepath.Join(fsDir, "cgroup.procs"),
		"mount -o remount,rw " + fsDir,
		"umount " + fsDir,
		"mount -t tmpfs none " + fsDir,
	} {
		mustFail(t, sb, attack)
	}
	if got := strings.TrimSpace(mustOK(t, sb, "cat "+memFile)); got != strconv.Itoa(limit) {
		t.Errorf("%s after the attempts to change it: %q", memFile, got)
	}
	if b, err := os.ReadFile(hostMemFile); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(limit) {
		t.Errorf("the host's %s after the sandbox's attempts: %q, %v", hostMemFile, b, err)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// testNetworkInterface: a sandbox without a network has, as a container,
// an interface besides loopback that Go's net.Interfaces lists up and
// running with an IPv4 address; nothing reaches the host through it.
func testNetworkInterface(t *testing.T, rt *Runtime) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if !tunAvailable() {
		privtest.Skip(t, "no /dev/net/tun: sandboxes have loopback only")
	}
	sb := create(t, rt, Config{HostBase: true, Binds: []Bind{{Source: exe, Target: "/msb-test-helper", ReadOnly: true}}})
	if got := mustOK(t, sb, "ls /sys/class/net | tr '\\n' ' '"); got != "eth0 lo " {
		t.Errorf("/sys/class/net: %q, want the sandbox's own eth0 and lo", got)
	}
	out := mustOK(t, sb, envHelper+"="+helperInterfaces+" /msb-test-helper")
	found := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "\t")
		if len(f) == 3 && f[0] == forwarderTap {
			found = true
			if !strings.Contains(f[1], "up") || !strings.Contains(f[1], "running") || strings.Contains(f[1], "loopback") {
				t.Errorf("%s's flags: %s, want up and running", f[0], f[1])
			}
			if !strings.Contains(f[2], forwarderGuest) {
				t.Errorf("%s's addresses: %s, want %s", f[0], f[2], forwarderGuest)
			}
		}
	}
	if !found {
		t.Fatalf("net.Interfaces in the sandbox lists no %s:\n%s", forwarderTap, out)
	}
	if got := strings.TrimSpace(mustOK(t, sb, `awk '$2 == "00000000"' /proc/net/route`)); got != "" {
		t.Errorf("a default route: %q", got)
	}
	// Nothing of the host answers: not on the interface's subnet (the
	// neighbour lookup fails), not at any of the host's own addresses.
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	targets := []string{forwarderGateway}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			targets = append(targets, ipn.IP.String())
		}
	}
	for _, ip := range targets {
		out := mustFail(t, sb, fmt.Sprintf("timeout 10 bash -c 'echo hi > /dev/tcp/%s/%d' 2>&1", ip, port))
		if !strings.Contains(out, "unreachable") && !strings.Contains(out, "No route to host") {
			t.Errorf("connecting to the host's %s:%d: %q, want no route", ip, port, out)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the host's listener accepted %d connections from the sandbox", n)
	}
}
