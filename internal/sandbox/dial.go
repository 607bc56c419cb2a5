package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"

	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// ErrRefused means nothing listens on the port DialTCP asked for.
var ErrRefused = errors.New("connection refused")

// DialTCP connects to port on the sandbox's loopback (127.0.0.1, else
// ::1) as a process inside would: the supervisor connects from inside the
// sandbox's network namespace and passes the socket back over the control
// socket, which works in both modes (a rootless msb cannot join the
// namespace itself). A port nothing listens on fails with ErrRefused.
func (s *Sandbox) DialTCP(ctx context.Context, port int) (net.Conn, error) {
	resp, err := s.call(ctx, &wire.Request{Op: wire.OpDial, Port: port})
	if err != nil {
		return nil, err
	}
	if resp.File == nil {
		return nil, fmt.Errorf("dialing port %d: the sandbox sent no socket", port)
	}
	defer resp.File.Close()
	c, err := net.FileConn(resp.File)
	if err != nil {
		return nil, fmt.Errorf("dialing port %d: using the sandbox's socket: %w", port, err)
	}
	return c, nil
}

// fdReader reads the control socket with recvmsg, keeping the descriptors
// that come with what it reads (an OpDial's socket) until the frame they
// belong to is decoded (take). It waits in the netpoller and honours read
// deadlines as the file's Read does.
type fdReader struct {
	rc  syscall.RawConn
	oob []byte // the control messages of a read; one goroutine reads at a time

	mu  sync.Mutex // guards fds
	fds []int      // received, oldest first, not yet taken
}

// maxRights is how many descriptors one read can take in: one per frame,
// and a read holds a few frames.
const maxRights = 16

func newFdReader(f *os.File) (*fdReader, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("reading the control socket: %w", err)
	}
	return &fdReader{rc: rc, oob: make([]byte, unix.CmsgSpace(4*maxRights))}, nil
}

func (r *fdReader) Read(p []byte) (int, error) {
	var n, oobn int
	var rerr error
	err := r.rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), p, r.oob, unix.MSG_CMSG_CLOEXEC)
		return rerr != unix.EAGAIN
	})
	if err != nil {
		return 0, err
	}
	if rerr != nil {
		return 0, rerr
	}
	if oobn > 0 {
		r.keep(r.oob[:oobn])
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// keep stores the descriptors of the control messages oob.
func (r *fdReader) keep(oob []byte) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		if fds, err := unix.ParseUnixRights(&m); err == nil {
			r.fds = append(r.fds, fds...)
		}
	}
}

// take returns the oldest descriptor received, as a file; nil if none.
func (r *fdReader) take() *os.File {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.fds) == 0 {
		return nil
	}
	fd := r.fds[0]
	r.fds = r.fds[1:]
	return os.NewFile(uintptr(fd), "sandbox-socket")
}

// closeAll closes the descriptors nobody took.
func (r *fdReader) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, fd := range r.fds {
		unix.Close(fd)
	}
	r.fds = nil
}
