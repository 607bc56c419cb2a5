package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/minisandbox/msb/internal/sandbox/wire"
	"github.com/minisandbox/msb/internal/session"
	"golang.org/x/sys/unix"
)

// TestAttachReadsEachByteOnce: on a restored sandbox's connection, adopt
// asks the supervisor for its streaming execs first (wire.OpExecs, as
// wire.AdoptID) and keeps what they send meanwhile; the requests after it
// are numbered above the last ID the supervisor saw; attachExec hands on
// each byte of the exec's output once from the caller's offset, although
// the final answer came before the chunks sent again (wire.OpAttach).
// The peer plays the restored supervisor's part of the protocol, as one
// of an msb before the binary frames (JSON only: the host's requests
// stay JSON) and as one that reads them (the requests after OpExecs are
// binary).
func TestAttachReadsEachByteOnce(t *testing.T) {
	for _, bin := range []bool{false, true} {
		t.Run(fmt.Sprintf("binary=%v", bin), func(t *testing.T) { testAttachReadsEachByteOnce(t, bin) })
	}
}

func testAttachReadsEachByteOnce(t *testing.T, bin bool) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	c := newConn(os.NewFile(uintptr(fds[0]), "host"), nil)
	defer c.close()
	peer := os.NewFile(uintptr(fds[1]), "peer")
	defer peer.Close()
	out := wire.NewWriter(peer)
	out.SetBinary(bin)
	read := func(req *wire.Request) error {
		*req = wire.Request{}
		if err := wire.ReadFrame(peer, req); err != nil {
			return err
		}
		if want := bin && req.Op != wire.OpExecs; req.Binary() != want {
			return fmt.Errorf("request %s came binary=%v, want %v", req.Op, req.Binary(), want)
		}
		return nil
	}

	result := &session.Result{Output: "abcde", ExitCode: 4}
	chunk := func(off int64, data string) wire.Response {
		return wire.Response{ID: 5, More: true, Stream: "stdout", Data: []byte(data), Off: off}
	}
	errs := make(chan error, 1)
	go func() {
		errs <- func() error {
			var req wire.Request
			if err := read(&req); err != nil || req.Op != wire.OpExecs || req.ID != wire.AdoptID {
				return fmt.Errorf("first request %+v (%v), want %s as wire.AdoptID", req, err, wire.OpExecs)
			}
			// Before the answer: a chunk and the final answer of exec 5,
			// and the final answer of exec 3, which is not listed.
			for _, r := range []wire.Response{chunk(0, "ab"), {ID: 5, Result: result, Off: 5}, {ID: 3, Result: result}} {
				out.Write(r)
			}
			out.Write(wire.Response{ID: wire.AdoptID, Execs: &wire.Execs{Last: 9,
				Streams: []wire.ExecState{{ID: 5, Key: "k", Sent: 5}}, Binary: bin}})
			if err := read(&req); err != nil || req.Op != wire.OpAttach || req.Ref != 5 {
				return fmt.Errorf("request %+v (%v), want %s of 5", req, err, wire.OpAttach)
			}
			out.Write(chunk(0, "ab")) // sent again
			out.Write(chunk(2, "cde"))
			for {
				if err := read(&req); err != nil {
					return err
				}
				if req.Op != wire.OpStreamAck {
					break
				}
			}
			if req.ID != 10 {
				return fmt.Errorf("the request after the attach has ID %d, want 10 (above the last, 9)", req.ID)
			}
			return out.Write(wire.Response{ID: req.ID})
		}()
	}()

	ctx := context.Background()
	if err := c.adopt(ctx); err != nil {
		t.Fatal(err)
	}
	var got string
	resp, err := c.attachExec(ctx, "k", 1, func(r wire.Response) { got += string(r.Data) })
	if err != nil || got != "bcde" || resp.Off != 5 {
		t.Fatalf("attach: output %q, final %+v, %v; want bcde (from offset 1), the final answer", got, resp, err)
	}
	if _, err := c.attachExec(ctx, "k", 0, func(wire.Response) {}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a second attach: %v, want ErrNotFound", err)
	}
	if _, err := c.call(ctx, &wire.Request{Op: wire.OpListDir}); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if len(c.orphans) != 0 {
		t.Fatalf("kept %v after the attach", c.orphans)
	}
}
