package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/cgroup"
	"github.com/minisandbox/msb/internal/sandbox/sbinit"
	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// A sandbox whose network is "none" (the default) gets a network namespace
// of its own, with its loopback up and its interface made. The kernel's
// making of one (every per-namespace part of the network stack is set up)
// and init's setup of the loopback and the interface took 0.7–1.5 ms of a
// create on this project's 2-core VM (docs/bench.md, 2026-12-06).
// A runtime with RuntimeOptions.NetSpares makes that many namespaces ahead,
// set up as init would set them up (sbinit.PrepareNetwork), beside the
// sandboxes' creates, on a thread that goes back to the host's namespace
// after (makeNet); a create takes one and clones
// its init from a thread that entered it, so that init and every process
// of the sandbox are born in it, as with CLONE_NEWNET. Each namespace
// serves one sandbox and is never reused: it is gone with the sandbox's
// processes, and what the sandbox sees is what a clone would have made.
// With none ready (the first create, a burst) a create has one made at
// once the same way (take), so that every sandbox's control socket lies
// in its namespace (package checkpoint dumps no other); where that
// cannot be (a kernel that refuses, a make that failed lately) init's
// clone makes its own, as without spares. A failed make is retried on a
// take after a delay that doubles with each failure in a row
// (netRetryFirst to netRetryMax), logged at Warn. A thread that cannot get back to the
// host's namespace is parked for good (see makeNet) and turns the pool
// off for the runtime's life: each later create would strand another.

// EngineNetSpares is the engine's RuntimeOptions.NetSpares: two, so that
// a create that follows another at once still finds one.
const EngineNetSpares = 2

// The delay before the pool makes a namespace again after a failed make:
// netRetryFirst after the first failure, doubled after each next one in a
// row, at most netRetryMax. A failure such as EMFILE, ENOMEM or the
// kernel's limit on namespaces (user.max_net_namespaces) may pass; a
// failing make costs about what a create's own namespace costs, so a
// retry a minute at worst costs nothing that matters.
const (
	netRetryFirst = time.Second
	netRetryMax   = time.Minute
)

// netPool holds the namespaces made ahead.
type netPool struct {
	spares int
	iface  *wire.Iface // made in each (nil: loopback alone)
	host   *os.File    // the host's network namespace, where a spawning thread goes back to
	log    *slog.Logger

	// Test hooks, nil outside tests: makeHook's error fails a make
	// before its unshare; returnHook replaces a thread's setns back to
	// host (spawned: after spawnIn's spawn; else after a make), so that
	// a test can have it fail.
	makeHook   func() error
	returnHook func(host *os.File, spawned bool) error

	mu       sync.Mutex // guards what follows
	ready    []*readyNet
	making   bool      // fill runs
	failures int       // makes that failed in a row
	retry    time.Time // no make before this (after a failure)
	lastErr  error     // the last make's error; nil once one works
	off      error     // a thread could not get back to host: none made or taken again
	closed   bool
	filler   sync.WaitGroup // fill
}

// readyNet is a namespace made ahead and what holds its interface.
type readyNet struct {
	ns  *os.File // the namespace (its nsfs file)
	tap *os.File // iface's tap device; nil: none
	// ctl is a socketpair made in the namespace, for the sandbox's
	// control socket (nil once Create took it): a socket belongs to the
	// namespace it was made in, and CRIU dumps no socket of a namespace
	// it does not dump (package checkpoint), so a control socket made in
	// the host's would leave the sandbox undumpable.
	ctl []int
}

func (n *readyNet) close() {
	n.ns.Close()
	if n.tap != nil {
		n.tap.Close()
	}
	for _, fd := range n.ctl {
		unix.Close(fd)
	}
	n.ctl = nil
}

func newNetPool(spares int, iface *wire.Iface, log *slog.Logger) (*netPool, error) {
	host, err := openHostNet()
	if err != nil {
		return nil, fmt.Errorf("opening the host's network namespace: %w", err)
	}
	return &netPool{spares: spares, iface: iface, host: host, log: log}, nil
}

// openHostNet opens the host's network namespace: the calling thread's,
// locked so that it is not one of those the Go scheduler keeps out of
// its use (a thread that spawns in a sandbox's, one parked in one). Not
// /proc/self's: that is the main thread's, which may be a parked one.
func openHostNet() (*os.File, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return os.Open("/proc/thread-self/ns/net")
}

// fits reports whether the pool's namespaces are what init would make for
// a sandbox whose interface is iface.
func (p *netPool) fits(iface *wire.Iface) bool {
	if p.iface == nil || iface == nil {
		return p.iface == iface
	}
	return *p.iface == *iface
}

// take returns a namespace made ahead, or, when none is ready (the first
// create after the runtime's start, a burst), one made now as the pool
// makes them, so that the sandbox's control socket lies in it and its
// processes can be dumped (package checkpoint). It is nil, and init's
// clone makes the sandbox's namespace, while the pool is off or its last
// make failed (until a retry works), or when this make fails. Either
// way, the pool makes up for it in the background (takeReady). The
// caller owns what it got.
func (p *netPool) take() *readyNet {
	if n := p.takeReady(); n != nil {
		return n
	}
	p.mu.Lock()
	failing := p.off != nil || p.closed || p.failures > 0
	p.mu.Unlock()
	if failing {
		return nil
	}
	n, err := p.makeNet()
	if err != nil {
		// The pool's own make, which takeReady started, logs a
		// failure and delays the next; a thread that could not get
		// back turns it off.
		if errors.Is(err, cgroup.ErrStranded) {
			p.mu.Lock()
			p.turnOff(err)
			p.mu.Unlock()
		}
		p.log.Debug("making a network namespace for a create failed: its init makes its own", "err", err)
		return nil
	}
	return n
}

// takeReady returns a namespace made ahead, or nil when none is ready,
// and has the pool make up for it in the background (after a failed
// make, not before its retry time). The caller owns what it got.
func (p *netPool) takeReady() *readyNet {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.off != nil {
		return nil
	}
	var n *readyNet
	if len(p.ready) > 0 {
		n = p.ready[0]
		p.ready = p.ready[1:]
	}
	if !p.closed && !p.making && len(p.ready) < p.spares && (p.failures == 0 || !time.Now().Before(p.retry)) {
		p.making = true
		p.filler.Add(1)
		go p.fill()
	}
	return n
}

// fill makes namespaces until the pool holds its spares, or one fails.
func (p *netPool) fill() {
	defer p.filler.Done()
	for {
		n, err := p.makeNet()
		p.mu.Lock()
		switch {
		case errors.Is(err, cgroup.ErrStranded):
			p.turnOff(err)
		case err != nil:
			p.failures++
			delay := netRetryMax
			if p.failures <= 6 { // 1 s << 6 is past the minute
				delay = min(netRetryFirst<<(p.failures-1), netRetryMax)
			}
			p.retry, p.lastErr = time.Now().Add(delay), err
			p.log.Warn("making a network namespace ahead failed: sandboxes' inits make their own until a retry works",
				"err", err, "failures_in_a_row", p.failures, "retry_after", delay)
		case p.closed || p.off != nil:
			n.close()
		default:
			if p.failures > 0 {
				p.log.Info("network namespaces are made ahead again", "failures_before", p.failures)
			}
			p.failures, p.lastErr = 0, nil
			p.ready = append(p.ready, n)
			if len(p.ready) < p.spares {
				p.mu.Unlock()
				continue
			}
		}
		p.making = false
		p.mu.Unlock()
		return
	}
}

// turnOff stops the pool for good after a thread could not get back to
// the host's namespace (err): the next would strand one more thread. Its
// caller holds p.mu.
func (p *netPool) turnOff(err error) {
	if p.off == nil {
		p.log.Warn("a thread of msb could not get back to the host's network namespace and is parked for good; this runtime makes no more network namespaces ahead",
			"err", err)
	}
	p.off = err
	for _, n := range p.ready {
		n.close()
	}
	p.ready = nil
}

// close waits for fill and closes what the pool holds.
func (p *netPool) close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.filler.Wait()
	for _, n := range p.ready {
		n.close()
	}
	p.ready = nil
	return p.host.Close()
}

// parked lists the threads (their ids) parked for good, out of the host's
// network namespace, for the life of the process.
var parked struct {
	sync.Mutex
	tids []int
}

// noteParked records the calling thread (locked) as parked for good.
func noteParked() {
	parked.Lock()
	parked.tids = append(parked.tids, unix.Gettid())
	parked.Unlock()
}

// parkedThreads returns the ids of the threads parked so far.
func parkedThreads() []int {
	parked.Lock()
	defer parked.Unlock()
	return append([]int(nil), parked.tids...)
}

// returnToHost moves the calling thread back to the host's namespace
// (spawned: from the one it spawned an init in).
func (p *netPool) returnToHost(spawned bool) error {
	var err error
	if p.returnHook != nil {
		err = p.returnHook(p.host, spawned)
	} else {
		err = unix.Setns(int(p.host.Fd()), unix.CLONE_NEWNET)
	}
	if err != nil {
		return fmt.Errorf("%w in a sandbox's network namespace: returning to the host's: %w", cgroup.ErrStranded, err)
	}
	return nil
}

// makeNet makes a network namespace set up for a sandbox on a thread of
// its own, which then goes back to the host's. The thread must not end:
// it may be one that spawned a sandbox's init before, and a thread's end
// sends SIGKILL to the inits it spawned (Pdeathsig follows the thread),
// which is what a goroutine that exits locked does (and the runtime cannot
// end the main thread: it parks it, in the namespace). Should the thread
// not get back, its goroutine blocks for good, keeping it locked and
// alive, and the error wraps cgroup.ErrStranded.
func (p *netPool) makeNet() (*readyNet, error) {
	type made struct {
		n   *readyNet
		err error
	}
	c := make(chan made, 1)
	go func() {
		runtime.LockOSThread()
		n, err := p.makeNetHere()
		if berr := p.returnToHost(false); berr != nil {
			if n != nil {
				n.close()
			}
			noteParked()
			c <- made{err: errors.Join(err, berr)}
			select {} // see above
		}
		runtime.UnlockOSThread()
		c <- made{n, err}
	}()
	m := <-c
	return m.n, m.err
}

// makeNetHere moves the calling thread into a new network namespace and
// sets it up.
func (p *netPool) makeNetHere() (*readyNet, error) {
	if p.makeHook != nil {
		if err := p.makeHook(); err != nil {
			return nil, err
		}
	}
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("unsharing a network namespace: %w", err)
	}
	ns, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("opening the new network namespace: %w", err)
	}
	tap, err := sbinit.PrepareNetwork(p.iface)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("setting up a network namespace ahead: %w", err)
	}
	n := &readyNet{ns: ns, tap: tap}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		n.close()
		return nil, fmt.Errorf("control socketpair in a network namespace ahead: %w", err)
	}
	n.ctl = fds[:]
	return n, nil
}

// spawnIn runs spawn (init's start, which clones init from the calling
// thread) on the calling thread moved into n, and moves the thread back
// to the host's namespace. Should it not get back, the thread must stay
// out of the Go scheduler's use (it is in the sandbox's namespace) and
// must not end (its end would SIGKILL every init it ever spawned, other
// sandboxes' too): it stays locked, the error wraps cgroup.ErrStranded,
// and the goroutine the caller runs spawnIn on (onOwnThread's, or
// cgroup.StartInside's) parks for good after handing the error on. The
// pool is then off; the create fails, and its caller kills the init that
// may have started.
func (p *netPool) spawnIn(n *readyNet, spawn func() error) error {
	runtime.LockOSThread()
	if err := unix.Setns(int(n.ns.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering the sandbox's network namespace: %w", err)
	}
	err := spawn()
	if berr := p.returnToHost(true); berr != nil {
		noteParked()
		p.mu.Lock()
		p.turnOff(berr)
		p.mu.Unlock()
		return errors.Join(err, berr) // the thread stays locked
	}
	runtime.UnlockOSThread()
	return err
}

// onOwnThread runs f on a goroutine of its own and returns its error. A
// goroutine whose f stranded its thread (cgroup.ErrStranded) parks for
// good, keeping the thread.
func onOwnThread(f func() error) error {
	c := make(chan error, 1)
	go func() {
		err := f()
		c <- err
		if errors.Is(err, cgroup.ErrStranded) {
			select {} // the thread stays locked to this goroutine, alive, for good
		}
	}()
	return <-c
}

// netNow gives a sandbox a namespace set up for iface as the pool's are,
// with its control socketpair made in it: one made ahead where the pool
// fits iface and has one ready, else one made now (by the pool, or by a
// pool of this call's where the runtime keeps none or another kind). A
// restored sandbox without a network takes one (Runtime.Restore): its
// processes are restored into it, and its control socket lies in it, so
// that it can be dumped again, as a created sandbox that took one can.
func (rt *Runtime) netNow(iface *wire.Iface) (*readyNet, error) {
	p := rt.nets
	if p != nil && p.fits(iface) {
		if n := p.takeReady(); n != nil {
			return n, nil
		}
		p.mu.Lock()
		off := p.off
		p.mu.Unlock()
		if off != nil {
			return nil, fmt.Errorf("no network namespace can be made: %w", off)
		}
	} else {
		q, err := newNetPool(0, iface, rt.log)
		if err != nil {
			return nil, err
		}
		defer q.close()
		p = q
	}
	n, err := p.makeNet()
	if err != nil {
		return nil, fmt.Errorf("making a network namespace: %w", err)
	}
	return n, nil
}
