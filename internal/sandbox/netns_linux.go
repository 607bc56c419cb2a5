package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"

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
// With none ready (a burst, or a kernel that refuses) init's clone makes
// its own, as without spares.

// EngineNetSpares is the engine's RuntimeOptions.NetSpares: two, so that
// a create that follows another at once still finds one.
const EngineNetSpares = 2

// netPool holds the namespaces made ahead.
type netPool struct {
	spares int
	iface  *wire.Iface // made in each (nil: loopback alone)
	host   *os.File    // the host's network namespace, where a spawning thread goes back to
	log    func(msg string, args ...any)

	mu     sync.Mutex // guards ready, making, failed, closed
	ready  []*readyNet
	making bool  // fill runs
	failed error // the last make failed: no more are made
	closed bool
	filler sync.WaitGroup // fill
}

// readyNet is a namespace made ahead and what holds its interface.
type readyNet struct {
	ns  *os.File // the namespace (its nsfs file)
	tap *os.File // iface's tap device; nil: none
}

func (n *readyNet) close() {
	n.ns.Close()
	if n.tap != nil {
		n.tap.Close()
	}
}

func newNetPool(spares int, iface *wire.Iface, log func(string, ...any)) (*netPool, error) {
	host, err := os.Open("/proc/self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("opening the host's network namespace: %w", err)
	}
	return &netPool{spares: spares, iface: iface, host: host, log: log}, nil
}

// fits reports whether the pool's namespaces are what init would make for
// a sandbox whose interface is iface.
func (p *netPool) fits(iface *wire.Iface) bool {
	if p.iface == nil || iface == nil {
		return p.iface == iface
	}
	return *p.iface == *iface
}

// take returns a namespace made ahead, or nil when none is ready, and has
// the pool make up for it in the background. The caller owns what it got.
func (p *netPool) take() *readyNet {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n *readyNet
	if len(p.ready) > 0 {
		n = p.ready[0]
		p.ready = p.ready[1:]
	}
	if !p.closed && !p.making && p.failed == nil && len(p.ready) < p.spares {
		p.making = true
		p.filler.Add(1)
		go p.fill()
	}
	return n
}

// fill makes namespaces until the pool holds its spares.
func (p *netPool) fill() {
	defer p.filler.Done()
	for {
		n, err := makeNet(p.host, p.iface)
		p.mu.Lock()
		switch {
		case err != nil:
			p.failed = err
			p.log("no network namespaces made ahead: each sandbox's init makes its own", "err", err)
		case p.closed:
			n.close()
		default:
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

// makeNet makes a network namespace set up for a sandbox on a thread of
// its own, which then goes back to host. The thread must not end: it may
// be one that spawned a sandbox's init before, and a thread's end sends
// SIGKILL to the inits it spawned (Pdeathsig follows the thread), which is
// what a goroutine that exits locked does (and the runtime cannot end the
// main thread: it parks it, in the namespace). Should the thread not get
// back, its goroutine blocks for good, keeping it locked and alive.
func makeNet(host *os.File, iface *wire.Iface) (*readyNet, error) {
	type made struct {
		n   *readyNet
		err error
	}
	c := make(chan made, 1)
	go func() {
		runtime.LockOSThread()
		n, err := makeNetHere(iface)
		if berr := unix.Setns(int(host.Fd()), unix.CLONE_NEWNET); berr != nil {
			if n != nil {
				n.close()
			}
			c <- made{err: errors.Join(err, fmt.Errorf("returning to the host's network namespace: %w", berr))}
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
func makeNetHere(iface *wire.Iface) (*readyNet, error) {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("unsharing a network namespace: %w", err)
	}
	ns, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("opening the new network namespace: %w", err)
	}
	tap, err := sbinit.PrepareNetwork(iface)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("setting up a network namespace ahead: %w", err)
	}
	return &readyNet{ns: ns, tap: tap}, nil
}

// spawnIn runs spawn (init's start, which clones init from the calling
// thread) on the calling thread moved into n, and moves the thread back
// to host. Should it not get back, the thread stays locked, so that it
// ends with its goroutine (the caller runs spawnIn on a goroutine of its
// own: onOwnThread, or cgroup.StartInside's), which, as when StartInside's
// thread cannot leave a sandbox's cgroup, kills the inits it spawned: the
// create fails.
func (n *readyNet) spawnIn(host *os.File, spawn func() error) error {
	runtime.LockOSThread()
	if err := unix.Setns(int(n.ns.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering the sandbox's network namespace: %w", err)
	}
	err := spawn()
	if berr := unix.Setns(int(host.Fd()), unix.CLONE_NEWNET); berr != nil {
		return errors.Join(err, fmt.Errorf("returning to the host's network namespace: %w", berr))
	}
	runtime.UnlockOSThread()
	return err
}

// onOwnThread runs f on a goroutine of its own and returns its error.
func onOwnThread(f func() error) error {
	c := make(chan error, 1)
	go func() { c <- f() }()
	return <-c
}
