package sbinit

import (
	"io"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// trimmer gives the supervisor's free heap back to the kernel once the
// supervisor is idle after work that allocated. An idle supervisor is most
// of a sandbox's life (the agent's model thinks between commands), and Go
// keeps freed heap mapped: one command with 4 MB of output left 8.5 MiB
// resident for minutes afterwards, against 1.5 MiB before it. The trim
// (two collections, then the free pages released) runs once per burst of
// requests, trimDelay after the last one ended, and only when what the
// requests since the last trim allocated is counted at trimMin or more, so
// that round trips of small commands never pay for it.
//
// The bytes on the socket stand for what the supervisor allocated: its
// heap grows with what it carries (a command's output, a file's content),
// about carryAlloc times each byte (the output gathered as it grows,
// made valid UTF-8, encoded, framed), and counting them costs an atomic
// add per read or write. Each request also allocates about reqAlloc
// whatever it carries (its frames decoded and encoded, its context, a
// session command's fifo and poll set), which end counts. Counted once
// each, bytes and requests let the garbage grow far past trimMin: a
// command with 1 MB of output (under the 1 MiB cap) allocated 5.5 MB and
// made no trim due, and 100 small commands left the supervisor 1.7 MiB
// larger until its heap reached 4 MB (docs/bench.md, session 19). Asking the runtime costs memory or time in every sandbox
// (runtime.ReadMemStats left ~0.3 MiB of the runtime's structures touched
// in each supervisor, runtime/metrics adds 0.13 ms of package init), and
// the resident memory the kernel reports grows by more than the heap
// where the host's memory is accounted in larger steps (in TestCgroupV2's
// VM a session and two small commands grew it by ~2 MiB, and the trim
// that followed left the supervisor 0.3 MiB larger).
//
// The timer is armed once per burst, not once per request: stopping and
// resetting it around every request woke the thread the runtime had
// waiting in the netpoller (it sleeps until the earliest timer, and a
// timer added earlier than that interrupts its wait), one more thread
// wake-up in every round trip of a session.
type trimmer struct {
	mu       sync.Mutex // guards inFlight, lastEnd and armed
	inFlight int
	lastEnd  time.Time // when the last request in flight ended
	armed    bool      // timer will call check
	timer    *time.Timer

	moved     atomic.Uint64 // bytes read from and written to the control socket (carryAlloc each), and reqAlloc per request
	trimming  sync.Mutex    // held by a trim (a timer's goroutine); guards trimmedAt
	trimmedAt uint64        // moved at the last trim
	noHuge    bool          // advise against huge pages after a trim (wire.Config.NoHugePages)
}

const (
	trimDelay = time.Second
	// trimMin: a trim's first collection leaves the runtime ~0.5 MiB of
	// its own for good (its span sets and mark bits: docs/bench.md,
	// 2026-12-06; 0.52 MiB after 60 small commands at fd816ed), so a
	// trim pays once about as much is garbage: after ~35 commands with
	// 2 kB of output, 5 with 20 kB, one with 100 kB.
	trimMin = 512 << 10
	// reqAlloc is what a request allocates besides the bytes it carries,
	// carryAlloc how many times it allocates each of those: a session
	// command grew the idle supervisor by 3.6 kB with no output, 9.8 kB
	// with 2 kB of it, 85 kB with 20 kB and 5.5 MB with 1 MB (fd816ed;
	// docs/bench.md, session 19).
	reqAlloc   = 4 << 10
	carryAlloc = 5
)

// begin marks a request started; a trim that comes due meanwhile waits.
func (t *trimmer) begin() {
	t.mu.Lock()
	t.inFlight++
	t.mu.Unlock()
}

// end marks a request ended, counts reqAlloc for it, and the last one in
// flight arms the timer unless it is armed already.
func (t *trimmer) end() {
	t.moved.Add(reqAlloc)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inFlight--; t.inFlight > 0 {
		return
	}
	t.lastEnd = time.Now()
	t.arm(trimDelay)
}

// arm sets the timer to call check after d, if it is not set; the caller
// holds mu.
func (t *trimmer) arm(d time.Duration) {
	if t.armed {
		return
	}
	t.armed = true
	if t.timer == nil {
		t.timer = time.AfterFunc(d, t.check)
	} else {
		t.timer.Reset(d)
	}
}

// check trims once nothing has been in flight for trimDelay, and
// otherwise waits for what is left of it (requests in flight: the last to
// end arms the timer again).
func (t *trimmer) check() {
	t.mu.Lock()
	t.armed = false
	if t.inFlight > 0 {
		t.mu.Unlock()
		return
	}
	if left := trimDelay - time.Since(t.lastEnd); left > 0 {
		t.arm(left)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	t.trim()
}

// trim trims if nothing is in flight (a request that began after the
// timer fired makes it do nothing) and enough crossed the control socket
// since the last trim. The collections run outside mu: a request
// beginning meanwhile does not wait for them.
func (t *trimmer) trim() {
	t.mu.Lock()
	idle := t.inFlight == 0
	t.mu.Unlock()
	if !idle || !t.trimming.TryLock() {
		return
	}
	defer t.trimming.Unlock()
	if !t.due() {
		return
	}
	runtime.GC() // sync.Pools (encoding/json's buffers) empty over two collections
	debug.FreeOSMemory()
	// The heap's growth made runtime structures of its own, some of which
	// the runtime marks for huge pages (see noHugePages).
	if t.noHuge {
		noHugePages()
	}
	t.trimmedAt = t.moved.Load()
}

// due says whether trimMin or more was counted (carryAlloc per byte that
// crossed the socket, reqAlloc per request) since the last trim; the
// caller holds trimming.
func (t *trimmer) due() bool {
	return t.moved.Load()-t.trimmedAt >= trimMin
}

// meter is the control socket as the supervisor reads and writes it,
// counting the bytes into the trimmer's moved.
type meter struct {
	rw    io.ReadWriter
	moved *atomic.Uint64
}

func (m meter) Read(p []byte) (int, error) {
	n, err := m.rw.Read(p)
	m.moved.Add(uint64(n) * carryAlloc)
	return n, err
}

func (m meter) Write(p []byte) (int, error) {
	n, err := m.rw.Write(p)
	m.moved.Add(uint64(n) * carryAlloc)
	return n, err
}
