package sbinit

import (
	"errors"
	"io"
	"testing"

	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// TestCtlReader: init's reader of the control socket reads frames as the
// host writes them, stops at each frame's end (what follows stays in the
// socket for the supervisor) and reports the host's close as io.EOF.
func TestCtlReader(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	host := fdWriter(fds[1])
	for _, op := range []string{wire.OpStart, wire.OpShutdown} {
		if err := wire.WriteFrame(host, wire.Request{Op: op}); err != nil {
			t.Fatal(err)
		}
	}
	var req wire.Request
	if err := wire.ReadFrame(ctlReader(fds[0]), &req); err != nil || req.Op != wire.OpStart {
		t.Fatalf("first frame: %+v, %v", req, err)
	}
	if n, err := unix.IoctlGetInt(fds[0], unix.SIOCINQ); err != nil || n == 0 {
		t.Fatalf("the second frame was read along with the first: %d bytes left (%v)", n, err)
	}
	if err := wire.ReadFrame(ctlReader(fds[0]), &req); err != nil || req.Op != wire.OpShutdown {
		t.Fatalf("second frame: %+v, %v", req, err)
	}
	unix.Close(fds[1])
	if err := wire.ReadFrame(ctlReader(fds[0]), &req); !errors.Is(err, io.EOF) {
		t.Fatalf("after the host's close: %v, want io.EOF", err)
	}
}

type fdWriter int

func (fd fdWriter) Write(p []byte) (int, error) { return unix.Write(int(fd), p) }
