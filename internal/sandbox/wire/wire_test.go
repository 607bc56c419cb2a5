package wire

import (
	"bytes"
	"testing"
)

func TestFrameRoundTripStopsAtFrameEnd(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteFrame(&buf, Request{ID: 7, Op: OpExec, Data: []byte{0, 255}}); err != nil {
		t.Fatal(err)
	}
	buf.WriteString("trailing bytes for the next reader")
	var r Request
	if err := ReadFrame(&buf, &r); err != nil {
		t.Fatal(err)
	}
	if r.ID != 7 || r.Op != OpExec || !bytes.Equal(r.Data, []byte{0, 255}) {
		t.Fatalf("got %+v", r)
	}
	if buf.String() != "trailing bytes for the next reader" {
		t.Fatalf("ReadFrame consumed past its frame: %q left", buf.String())
	}
}

func FuzzReadFrame(f *testing.F) {
	var buf bytes.Buffer
	WriteFrame(&buf, Request{ID: 1, Op: OpShutdown})
	f.Add(buf.Bytes())
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Request
		_ = ReadFrame(bytes.NewReader(b), &r)
	})
}
