package sandbox

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/cgroup"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/session"
	"golang.org/x/sys/unix"
)

// TestNetSpares: a root runtime with network namespaces made ahead
// (RuntimeOptions.NetSpares) gives each sandbox one of them, whole: every
// thread of its init and every process it starts is in it, and it is what
// init's own clone would have made (loopback up, the interface up, running
// and addressed, nothing of the host's); two sandboxes never share one;
// every thread of msb is back in the host's namespace; a create that finds
// none ready (the runtime's first) has one made at once as the pool makes
// them, with its control socket in it, as in those made ahead (CRIU dumps
// no socket of a namespace it does not dump: package checkpoint); the
// pool's refills kill no init (a thread that ends sends SIGKILL to the
// inits it spawned).
func TestNetSpares(t *testing.T) {
	privtest.RequireRoot(t)
	rt := testRuntime(t)
	if err := rt.SetNetSpares(2); err != nil {
		t.Fatal(err)
	}
	host := hostNetIno(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	conf := Config{HostBase: true, Binds: []Bind{{Source: exe, Target: "/msb-test-helper", ReadOnly: true}}}

	first := create(t, rt, conf) // none ready yet: one made at once, and the pool fills
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
		if c := ctlNetns(t, sb); c != ns {
			t.Errorf("sandbox %d's control socket is in network namespace %d, not its own %d", i, c, ns)
		}
	}
	if got[0] == got[1] || got[0] == host {
		t.Fatalf("network namespaces %v (the host's %d)", got, host)
	}
	if n := nsIno(t, "/proc/"+strconv.Itoa(first.InitPid())+"/ns/net"); made[n] || n == host {
		t.Errorf("the first sandbox, made before any was ready, is in namespace %d", n)
	} else if c := ctlNetns(t, first); c != n {
		t.Errorf("the first sandbox's control socket is in network namespace %d, not its own %d (its init's clone made it)", c, n)
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
	// went back (but those TestNetSparesStranded parked).
	deadline := time.Now().Add(10 * time.Second)
	for {
		var away []string
		threads, _ := filepath.Glob("/proc/self/task/*/ns/net")
		parked := map[string]bool{}
		for _, tid := range parkedThreads() {
			parked["/proc/self/task/"+strconv.Itoa(tid)+"/ns/net"] = true
		}
		for _, th := range threads {
			if n, err := readNsIno(th); err == nil && n != host && !parked[th] {
				away = append(away, th)
			}
		}
		if len(away) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("threads of msb outside the host's network namespace %d: %v (parked for good: %v)", host, away, parkedThreads())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNetSparesRetry: a failed make (injected through the pool's test
// hook where unshare would fail) is logged at Warn, keeps the pool from
// making another before its delay, which doubles with the next failure in
// a row, and a make after the delay fills the pool again, whose
// namespaces the next create takes.
func TestNetSparesRetry(t *testing.T) {
	privtest.RequireRoot(t)
	rt := testRuntime(t)
	if err := rt.SetNetSpares(2); err != nil {
		t.Fatal(err)
	}
	p := rt.nets
	var logs syncBuffer
	p.log = slog.New(slog.NewTextHandler(&logs, nil))
	var fails atomic.Int32
	fails.Store(2)
	p.makeHook = func() error {
		if fails.Add(-1) >= 0 {
			return unix.EMFILE
		}
		return nil
	}
	conf := Config{HostBase: true}
	settled := func() (failures int, retry time.Time, ready int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			p.mu.Lock()
			making, failures, retry, ready := p.making, p.failures, p.retry, len(p.ready)
			p.mu.Unlock()
			if !making {
				return failures, retry, ready
			}
			if time.Now().After(deadline) {
				t.Fatal("the pool's make runs after 30 s")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	before := time.Now()
	if n := p.takeReady(); n != nil { // none ready: it has the pool make, which fails
		t.Fatal("a namespace ready before any was made")
	}
	failures, retry, ready := settled()
	if failures != 1 || ready != 0 || retry.Before(before.Add(netRetryFirst)) || retry.After(time.Now().Add(netRetryFirst)) {
		t.Fatalf("after a failed make: %d failures, %d ready, retry in %v; want 1, 0, %v", failures, ready, time.Until(retry), netRetryFirst)
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "making a network namespace ahead failed") || !strings.Contains(out, "too many open files") {
		t.Fatalf("the failed make's log:\n%s", out)
	}
	// Before its retry time, a take starts no make, nor does a create
	// make one at once: its init makes its own.
	p.mu.Lock()
	p.retry = time.Now().Add(time.Hour)
	p.mu.Unlock()
	create(t, rt, conf)
	if failures, _, ready := settled(); failures != 1 || ready != 0 || fails.Load() != 1 {
		t.Fatalf("a take before the retry time: %d failures, %d ready, %d injected failures left; want 1, 0, 1", failures, ready, fails.Load())
	}
	// After it, a take makes again: the second failure in a row doubles
	// the delay.
	p.mu.Lock()
	p.retry = time.Now()
	p.mu.Unlock()
	before = time.Now()
	create(t, rt, conf)
	failures, retry, _ = settled()
	if failures != 2 || retry.Before(before.Add(2*netRetryFirst)) || retry.After(time.Now().Add(2*netRetryFirst)) {
		t.Fatalf("after a second failed make: %d failures, retry in %v; want 2, %v", failures, time.Until(retry), 2*netRetryFirst)
	}
	// A make that works fills the pool, and the next create gets one.
	p.mu.Lock()
	p.retry = time.Now()
	p.mu.Unlock()
	create(t, rt, conf)
	made := waitSpares(t, rt, 2)
	if failures, _, _ := settled(); failures != 0 || !strings.Contains(logs.String(), "made ahead again") {
		t.Fatalf("after a make that worked: %d failures; log:\n%s", failures, logs.String())
	}
	sb := create(t, rt, conf)
	if ns := nsIno(t, "/proc/"+strconv.Itoa(sb.InitPid())+"/ns/net"); !made[ns] {
		t.Fatalf("the create after the pool refilled is in namespace %d, none of those made ahead %v", ns, made)
	}
}

// TestNetSparesStranded: a thread that spawned an init in a namespace
// made ahead and cannot get back to the host's (its setns back fails,
// injected through the pool's test hook on a thread that spawned an
// earlier sandbox's init) fails that create alone, clearly, and is parked
// for good: it stays alive, in the sandbox's namespace, so the inits it
// spawned before live on (a thread's end would SIGKILL them). The pool is
// off after it, and creates go on without it.
// It runs with init spawned from a thread of its own (onOwnThread) and,
// where the runtime forks inits inside their cgroup v1 groups, from
// cgroup.StartInside's thread.
func TestNetSparesStranded(t *testing.T) {
	privtest.RequireRoot(t)
	t.Run("own-thread", func(t *testing.T) { testNetSparesStranded(t, false) })
	t.Run("cgroup-thread", func(t *testing.T) { testNetSparesStranded(t, true) })
}

func testNetSparesStranded(t *testing.T, forkInside bool) {
	rt := testRuntime(t)
	if forkInside && !rt.forkInside {
		t.Skip("this runtime does not fork inits inside their cgroups (cgroup v1 only)")
	}
	rt.forkInside = forkInside
	// With the root built ahead, the mount thread and the spawning
	// threads take turns with the runtime's P, and a thread's second
	// spawn, which this test needs, came rarely (none in 200 creates in
	// 1 of 8 runs); where the root is built changes nothing here.
	noAhead = true
	t.Cleanup(func() { noAhead = false })
	if err := rt.SetNetSpares(2); err != nil {
		t.Fatal(err)
	}
	p := rt.nets
	var logs syncBuffer
	p.log = slog.New(slog.NewTextHandler(&logs, nil))
	host := hostNetIno(t)
	var (
		mu        sync.Mutex
		spawnedOn = map[int]int{} // thread id -> the held sandbox whose init it spawned
		stranded  int             // the thread made to fail
		next      int             // the index in held of the create under way
	)
	p.returnHook = func(h *os.File, spawned bool) error {
		tid := unix.Gettid()
		mu.Lock()
		defer mu.Unlock()
		if spawned {
			if _, ok := spawnedOn[tid]; ok && stranded == 0 {
				stranded = tid
				return unix.ENOMEM
			}
			spawnedOn[tid] = next
		}
		return unix.Setns(int(h.Fd()), unix.CLONE_NEWNET)
	}
	conf := Config{HostBase: true}
	held := []*Sandbox{create(t, rt, conf)} // none ready yet: it has the pool fill
	var failed error
	for len(held) < 100 && failed == nil { // a second spawn on one thread is likely, not certain
		waitSpares(t, rt, 1)
		mu.Lock()
		next = len(held)
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		sb, err := rt.Create(ctx, conf)
		cancel()
		if err != nil {
			failed = err
			break
		}
		t.Cleanup(func() { sb.Close() })
		held = append(held, sb)
	}
	mu.Lock()
	tid, victim := stranded, spawnedOn[stranded]
	mu.Unlock()
	if failed == nil {
		t.Fatalf("no thread spawned two of %d sandboxes' inits", len(held))
	}
	if tid == 0 || !errors.Is(failed, cgroup.ErrStranded) || !errors.Is(failed, unix.ENOMEM) || !strings.Contains(failed.Error(), "parked for good") {
		t.Fatalf("the create whose thread could not get back: %v", failed)
	}
	// A thread's end would have sent SIGKILL to the inits it spawned by
	// now; the parked one stays, in the sandbox's namespace.
	time.Sleep(200 * time.Millisecond)
	ns, err := readNsIno("/proc/self/task/" + strconv.Itoa(tid) + "/ns/net")
	if err != nil || ns == host {
		t.Errorf("the stranded thread %d: namespace %d (the host's %d), %v; want alive, in the sandbox's", tid, ns, host, err)
	}
	if !slices.Contains(parkedThreads(), tid) {
		t.Errorf("thread %d is not among the parked %v", tid, parkedThreads())
	}
	for i, sb := range held {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := sb.Exec(ctx, session.ExecRequest{Command: "echo up", Timeout: 10 * time.Second})
		cancel()
		if err != nil || res.Output != "up\n" {
			t.Errorf("sandbox %d (thread %d spawned sandbox %d's init) after the thread was stranded: %q, %v", i, tid, victim, res.Output, err)
		}
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "parked for good") {
		t.Errorf("the log when a thread is stranded:\n%s", out)
	}
	// The pool is off: a create makes its own namespace, and the pool
	// makes no more.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sb := create(t, rt, Config{HostBase: true, Binds: []Bind{{Source: exe, Target: "/msb-test-helper", ReadOnly: true}}})
	if n := nsIno(t, "/proc/"+strconv.Itoa(sb.InitPid())+"/ns/net"); n == host {
		t.Fatal("a create after the pool turned off is in the host's namespace")
	}
	checkNoNetwork(t, sb)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		p.mu.Lock()
		off, ready, making := p.off, len(p.ready), p.making
		p.mu.Unlock()
		if making && time.Now().Before(deadline) {
			continue // a make the failed create's take started
		}
		if off == nil || ready != 0 || making {
			t.Fatalf("the pool after a stranded thread: off %v, %d ready, making %v", off, ready, making)
		}
		break
	}
}

// syncBuffer is a bytes.Buffer a logger may write to from any goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// ctlNetns returns the inode of the network namespace that the control
// socket of sb's init (its fd 3) was made in.
func ctlNetns(t *testing.T, sb *Sandbox) uint64 {
	t.Helper()
	pidfd, err := unix.PidfdOpen(sb.InitPid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	sock, err := unix.PidfdGetfd(pidfd, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sock)
	ns, err := unix.IoctlRetInt(sock, unix.SIOCGSKNS)
	if err != nil {
		t.Fatalf("the network namespace of init's fd 3: %v", err)
	}
	defer unix.Close(ns)
	var st unix.Stat_t
	if err := unix.Fstat(ns, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// checkNoNetwork checks what a sandbox without a network has: loopback and
// its own eth0, up (the tap's carrier: init, or msb for a namespace made
// ahead, holds its descriptor) with its address, and no route out.
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
		ready, failed := len(p.ready), p.off
		if failed == nil && !p.making {
			failed = p.lastErr
		}
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

// hostNetIno is the inode number of the host's network namespace: an
// unlocked thread's (the test's goroutine, locked for the read), not
// /proc/self's, the main thread's, which TestNetSparesStranded may have
// parked in a sandbox's.
func hostNetIno(t *testing.T) uint64 {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return nsIno(t, "/proc/thread-self/ns/net")
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
