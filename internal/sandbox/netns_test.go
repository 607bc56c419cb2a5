package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/privtest"
	"golang.org/x/sys/unix"
)

// TestNetSpares: a root runtime with network namespaces made ahead
// (RuntimeOptions.NetSpares) gives each sandbox one of them, whole: every
// thread of its init and every process it starts is in it, and it is what
// init's own clone would have made (loopback up, the interface up, running
// and addressed, nothing of the host's); two sandboxes never share one;
// every thread of msb is back in the host's namespace; a create that finds
// none ready makes its own; the pool's refills kill no init (a thread that
// ends sends SIGKILL to the inits it spawned).
func TestNetSpares(t *testing.T) {
	privtest.RequireRoot(t)
	rt := testRuntime(t)
	if err := rt.SetNetSpares(2); err != nil {
		t.Fatal(err)
	}
	host := nsIno(t, "/proc/self/ns/net")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	conf := Config{HostBase: true, Binds: []Bind{{Source: exe, Target: "/msb-test-helper", ReadOnly: true}}}

	first := create(t, rt, conf) // none ready yet: init makes its own, and the pool fills
	made := waitSpares(t, rt, 2)
	var got []uint64
	for i := range 2 {
		sb := create(t, rt, conf)
		pid := strconv.Itoa(sb.InitPid())
		ns := nsIno(t, "/proc/"+pid+"/ns/net")
		if !made[ns] {
			t.Fatalf("sandbox %d's network namespace %d is none of those made ahead %v", i, ns, made)
		}
		got = append(got, ns)
		threads, _ := filepath.Glob("/proc/" + pid + "/task/*/ns/net")
		if len(threads) < 2 {
			t.Fatalf("init %s has %d threads", pid, len(threads))
		}
		for _, th := range threads {
			if n := nsIno(t, th); n != ns {
				t.Errorf("init's thread %s is in network namespace %d, not its sandbox's %d", th, n, ns)
			}
		}
		if in := strings.TrimSpace(mustOK(t, sb, "readlink /proc/self/ns/net")); in != "net:["+strconv.FormatUint(ns, 10)+"]" {
			t.Errorf("a command's network namespace: %s, want init's %d", in, ns)
		}
		checkNoNetwork(t, sb)
	}
	if got[0] == got[1] || got[0] == host {
		t.Fatalf("network namespaces %v (the host's %d)", got, host)
	}
	if n := nsIno(t, "/proc/"+strconv.Itoa(first.InitPid())+"/ns/net"); made[n] || n == host {
		t.Errorf("the first sandbox, made before any was ready, is in namespace %d", n)
	}
	checkNoNetwork(t, first)
	// Each take has the pool make another, on a thread that may have
	// spawned an init before: none of those inits may die of it.
	var held []*Sandbox
	for range 8 {
		held = append(held, create(t, rt, Config{HostBase: true}))
	}
	for i, sb := range append(held, first) {
		if got := mustOK(t, sb, "echo up"); got != "up\n" {
			t.Fatalf("sandbox %d after the pool's refills: %q", i, got)
		}
	}
	// The threads that made the namespaces end; those that spawned in one
	// went back.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var away []string
		threads, _ := filepath.Glob("/proc/self/task/*/ns/net")
		for _, th := range threads {
			if n, err := readNsIno(th); err == nil && n != host {
				away = append(away, th)
			}
		}
		if len(away) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("threads of msb outside the host's network namespace: %v", away)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkNoNetwork checks what a sandbox without a network has: loopback and
// its own eth0, up (the tap's carrier: init holds its descriptor) with its
// address, and no route out.
func checkNoNetwork(t *testing.T, sb *Sandbox) {
	t.Helper()
	if !tunAvailable() {
		if got := mustOK(t, sb, "ls /sys/class/net | tr '\\n' ' '"); got != "lo " {
			t.Errorf("/sys/class/net: %q, want lo alone", got)
		}
		return
	}
	if got := mustOK(t, sb, "ls /sys/class/net | tr '\\n' ' '"); got != "eth0 lo " {
		t.Errorf("/sys/class/net: %q, want the sandbox's own eth0 and lo", got)
	}
	if got := strings.TrimSpace(mustOK(t, sb, "cat /sys/class/net/"+forwarderTap+"/carrier /sys/class/net/lo/flags")); got != "1\n0x9" {
		t.Errorf("%s's carrier and lo's flags: %q, want 1 and 0x9 (up, loopback)", forwarderTap, got)
	}
	out := mustOK(t, sb, envHelper+"="+helperInterfaces+" /msb-test-helper")
	if !strings.Contains(out, forwarderTap+"\tup|broadcast|multicast|running\t[") || !strings.Contains(out, forwarderGuest) {
		t.Errorf("net.Interfaces in the sandbox:\n%s\nwant %s up and running with %s", out, forwarderTap, forwarderGuest)
	}
	if got := strings.TrimSpace(mustOK(t, sb, `awk '$2 == "00000000"' /proc/net/route`)); got != "" {
		t.Errorf("a default route: %q", got)
	}
}

// waitSpares waits until rt's pool holds n namespaces and returns their
// inode numbers.
func waitSpares(t *testing.T, rt *Runtime, n int) map[uint64]bool {
	t.Helper()
	p := rt.nets
	deadline := time.Now().Add(30 * time.Second)
	for {
		p.mu.Lock()
		ready, failed := len(p.ready), p.failed
		inos := map[uint64]bool{}
		for _, r := range p.ready {
			var st unix.Stat_t
			if err := unix.Fstat(int(r.ns.Fd()), &st); err != nil {
				p.mu.Unlock()
				t.Fatal(err)
			}
			inos[st.Ino] = true
		}
		p.mu.Unlock()
		switch {
		case failed != nil:
			t.Fatalf("making network namespaces ahead: %v", failed)
		case ready >= n:
			return inos
		case time.Now().After(deadline):
			t.Fatalf("the pool holds %d network namespaces after 30 s, want %d", ready, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func nsIno(t *testing.T, path string) uint64 {
	t.Helper()
	n, err := readNsIno(path)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// readNsIno is the inode number of the namespace a /proc ns link names.
func readNsIno(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}
