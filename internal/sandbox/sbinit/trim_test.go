package sbinit

import (
	"bytes"
	"testing"
)

// TestMeterCounts: what the supervisor reads from and writes to the
// control socket through its meter adds up in the trimmer's count.
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
	if got := tr.moved.Load(); got != 4000 {
		t.Fatalf("moved %d bytes, want 4000", got)
	}
}

// TestTrimDue: a trim is due once trimMin bytes crossed the socket since
// the last one, and not before.
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
