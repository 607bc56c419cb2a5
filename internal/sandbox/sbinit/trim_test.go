package sbinit

import (
	"bytes"
	"testing"
)

// TestMeterCounts: what the supervisor reads from and writes to the
// control socket through its meter adds up in the trimmer's count,
// carryAlloc times each byte.
func TestMeterCounts(t *testing.T) {
	var tr trimmer
	var sock bytes.Buffer
	m := meter{rw: &sock, moved: &tr.moved}
	if _, err := m.Write(make([]byte, 3000)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Read(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	if got, want := tr.moved.Load(), uint64(4000*carryAlloc); got != want {
		t.Fatalf("counted %d for 4000 bytes, want %d", got, want)
	}
}

// TestTrimDue: a trim is due once trimMin was counted since the last
// one, and not before.
func TestTrimDue(t *testing.T) {
	var tr trimmer
	tr.moved.Add(trimMin - 1)
	if tr.due() {
		t.Fatalf("due after %d bytes", trimMin-1)
	}
	tr.moved.Add(1)
	if !tr.due() {
		t.Fatalf("not due after %d bytes", trimMin)
	}
	tr.trim() // nothing in flight: trims, and counts from here
	if tr.trimmedAt != trimMin || tr.due() {
		t.Fatalf("after a trim: trimmedAt %d, due %v; want %d, false", tr.trimmedAt, tr.due(), trimMin)
	}
	tr.moved.Add(trimMin / 2)
	if tr.due() {
		t.Fatal("due after half of trimMin since the last trim")
	}
}

// TestTrimCheck: the timer's check trims only once nothing has been in
// flight for trimDelay; before that it waits for the rest of the delay,
// and with a request in flight it leaves the arming to that request's end.
func TestTrimCheck(t *testing.T) {
	var tr trimmer
	tr.moved.Add(trimMin)
	tr.begin()
	tr.end() // arms the timer; checked by hand below
	tr.timer.Stop()
	tr.armed = false
	tr.check() // the request ended just now: not yet
	if tr.trimmedAt != 0 || !tr.armed {
		t.Fatalf("right after a request: trimmedAt %d, armed %v; want 0, true", tr.trimmedAt, tr.armed)
	}
	tr.timer.Stop()
	tr.armed = false
	tr.begin()
	tr.check() // a request in flight
	if tr.trimmedAt != 0 || tr.armed {
		t.Fatalf("with a request in flight: trimmedAt %d, armed %v; want 0, false", tr.trimmedAt, tr.armed)
	}
	tr.end()
	tr.timer.Stop()
	tr.armed = false
	tr.lastEnd = tr.lastEnd.Add(-trimDelay) // idle for trimDelay
	tr.check()
	if want := tr.moved.Load(); tr.trimmedAt != want || tr.armed { // trimMin and the requests' reqAlloc
		t.Fatalf("idle for trimDelay: trimmedAt %d, armed %v; want %d, false", tr.trimmedAt, tr.armed, want)
	}
}

// TestTrimCountsRequests: each request counts reqAlloc toward the trim
// besides its bytes, so a burst of small commands, whose bytes alone never
// reach trimMin, makes a trim due (100 of them, 2 kB of output each, left
// the idle supervisor 1.7 MiB larger without one).
func TestTrimCountsRequests(t *testing.T) {
	var tr trimmer
	n := trimMin / reqAlloc
	for i := 0; i < n-1; i++ {
		tr.begin()
		tr.end()
	}
	tr.timer.Stop()
	if tr.due() {
		t.Fatalf("due after %d requests that moved nothing", n-1)
	}
	tr.begin()
	tr.end()
	tr.timer.Stop()
	if !tr.due() {
		t.Fatalf("not due after %d requests that moved nothing (%d counted)", n, tr.moved.Load())
	}
}

// TestTrimAfterOneLargeOutput: one command whose output is below the
// session's 1 MiB cap makes a trim due: it allocated 5.5 MB for 1 MB of
// output, and counted once per byte it did not reach trimMin.
func TestTrimAfterOneLargeOutput(t *testing.T) {
	var tr trimmer
	var sock bytes.Buffer
	m := meter{rw: &sock, moved: &tr.moved}
	tr.begin()
	if _, err := m.Write(make([]byte, 1000000)); err != nil {
		t.Fatal(err)
	}
	tr.end()
	tr.timer.Stop()
	if !tr.due() {
		t.Fatalf("not due after a reply of 1 MB (%d counted)", tr.moved.Load())
	}
}
