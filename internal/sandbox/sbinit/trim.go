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
	mu       sync.Mutex
	inFlight int
	burst    uint64 // counts the bursts: a timer of an earlier one does nothing
	timer    *time.Timer

	trimming  sync.Mutex // held by a trim: timers of two bursts may overlap
	allocated uint64     // the heap allocated (cumulative) at the last trim
}

const (
	trimDelay = time.Second
	trimMin   = 1 << 20
)

// begin marks a request started.
func (t *trimmer) begin() {
	t.mu.Lock()
	t.inFlight++
	t.burst++
	t.mu.Unlock()
}

// end marks a request ended; the last one in flight arms the trim.
func (t *trimmer) end() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inFlight--
	if t.inFlight > 0 {
		return
	}
	burst := t.burst
	if t.timer != nil {
		t.timer.Stop()
	}
	t.timer = time.AfterFunc(trimDelay, func() { t.trim(burst) })
}

// trim trims if no request came since burst ended and it allocated enough.
func (t *trimmer) trim(burst uint64) {
	t.mu.Lock()
	idle := t.inFlight == 0 && t.burst == burst
	t.mu.Unlock()
	if !idle {
		return
	}
	t.trimming.Lock()
	defer t.trimming.Unlock()
	now := heapAllocated()
	if now-t.allocated < trimMin {
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
