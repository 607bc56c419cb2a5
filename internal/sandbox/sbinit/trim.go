package sbinit

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// trimmer gives the supervisor's free heap back to the kernel once the
// supervisor is idle after work that allocated. An idle supervisor is most
// of a sandbox's life (the agent's model thinks between commands), and Go
// keeps freed heap mapped: one command with 4 MB of output left 8.5 MiB
// resident for minutes afterwards, against 1.5 MiB before it. The trim
// (two collections, then the free pages released) runs once per burst of
// requests, trimDelay after the last one ended, and only when the burst
// allocated at least trimMin bytes, so that round trips of small commands
// never pay for it.
type trimmer struct {
	mu       sync.Mutex // guards inFlight and timer
	inFlight int
	timer    *time.Timer // armed when the last request in flight ends

	trimming  sync.Mutex // held by a trim (a timer's goroutine)
	allocated uint64     // the heap allocated (cumulative) at the last trim
}

const (
	trimDelay = time.Second
	trimMin   = 1 << 20
)

// begin marks a request started; it stops a trim that is due.
func (t *trimmer) begin() {
	t.mu.Lock()
	t.inFlight++
	if t.timer != nil {
		t.timer.Stop()
	}
	t.mu.Unlock()
}

// end marks a request ended; the last one in flight arms the trim.
func (t *trimmer) end() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inFlight--; t.inFlight > 0 {
		return
	}
	if t.timer == nil {
		t.timer = time.AfterFunc(trimDelay, t.trim)
	} else {
		t.timer.Reset(trimDelay)
	}
}

// trim trims if nothing is in flight (a request that began after the
// timer fired makes it do nothing) and the heap allocated enough since
// the last trim. The collections run outside mu: a request beginning
// meanwhile does not wait for them.
func (t *trimmer) trim() {
	t.mu.Lock()
	idle := t.inFlight == 0
	t.mu.Unlock()
	if !idle || !t.trimming.TryLock() {
		return
	}
	defer t.trimming.Unlock()
	if heapAllocated()-t.allocated < trimMin {
		return
	}
	runtime.GC() // sync.Pools (encoding/json's buffers) empty over two collections
	debug.FreeOSMemory()
	t.allocated = heapAllocated()
}

// heapAllocated is the bytes the heap has allocated since the start.
// (ReadMemStats stops the world for microseconds, once per trim;
// runtime/metrics would add 0.13 ms of package init to every sandbox.)
func heapAllocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}
