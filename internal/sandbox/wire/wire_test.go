package wire

import (
	"bytes"
	"errors"
	"io"
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

// trickle hands out its bytes a few at a time and fails every other read
// with errAgain, as a read interrupted by a deadline does.
type trickle struct {
	b     []byte
	n     int
	reads int
}

var errAgain = errors.New("interrupted")

func (t *trickle) Read(p []byte) (int, error) {
	t.reads++
	if t.reads%2 == 0 {
		return 0, errAgain
	}
	if len(t.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), t.n)], t.b)
	t.b = t.b[k:]
	return k, nil
}

// TestFrameReader: frames come out whole and in order however the bytes
// arrive; a failed read loses nothing (the next Next goes on), a frame
// larger than the read size comes out whole, and the end of the stream
// inside a frame is io.ErrUnexpectedEOF.
func TestFrameReader(t *testing.T) {
	var stream bytes.Buffer
	want := []Response{{ID: 1, Exit: 3}, {ID: 2, Data: bytes.Repeat([]byte("x"), 3*frameReadSize)}, {ID: 3, Error: "e"}}
	for _, r := range want {
		if err := WriteFrame(&stream, r); err != nil {
			t.Fatal(err)
		}
	}
	all := stream.Bytes()
	for _, step := range []int{1, 3, 4096, len(all)} {
		fr := FrameReader{R: &trickle{b: all, n: step}}
		for i := 0; i < len(want); {
			var got Response
			err := fr.Next(&got)
			if errors.Is(err, errAgain) {
				continue
			}
			if err != nil {
				t.Fatalf("step %d, frame %d: %v", step, i, err)
			}
			if got.ID != want[i].ID || got.Exit != want[i].Exit || got.Error != want[i].Error || !bytes.Equal(got.Data, want[i].Data) {
				t.Fatalf("step %d, frame %d: got ID %d, %d bytes of data", step, i, got.ID, len(got.Data))
			}
			i++
		}
		var r Response
		for err := fr.Next(&r); !errors.Is(err, io.EOF); err = fr.Next(&r) {
			if !errors.Is(err, errAgain) {
				t.Fatalf("step %d: after the last frame: %v, want io.EOF", step, err)
			}
		}
	}
	fr := FrameReader{R: bytes.NewReader(all[:len(all)-1])}
	var r Response
	for range want[:len(want)-1] {
		if err := fr.Next(&r); err != nil {
			t.Fatal(err)
		}
	}
	if err := fr.Next(&r); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("end inside a frame: %v, want io.ErrUnexpectedEOF", err)
	}
}
