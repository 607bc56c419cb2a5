package sbinit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// dialTimeout bounds a connect on the sandbox's loopback, which answers at
// once unless the listener's backlog is full.
const dialTimeout = 30 * time.Second

// dial connects to req.Port on the sandbox's loopback (OpDial): 127.0.0.1,
// then ::1 for a server that listens on IPv6's loopback alone. The
// connected socket goes to the host with the response (reply).
func (s *supervisor) dial(ctx context.Context, req *wire.Request) (wire.Response, error) {
	if req.Port < 1 || req.Port > 65535 {
		return wire.Response{}, fail(wire.CodeInvalid, "port %d is not in 1-65535", req.Port)
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	port := strconv.Itoa(req.Port)
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", port))
	if errors.Is(err, unix.ECONNREFUSED) {
		if c6, err6 := d.DialContext(ctx, "tcp6", net.JoinHostPort("::1", port)); err6 == nil {
			c, err = c6, nil
		}
	}
	if errors.Is(err, unix.ECONNREFUSED) {
		return wire.Response{}, fail(wire.CodeRefused, "connecting to port %d in the sandbox: connection refused (nothing listens on it)", req.Port)
	}
	if err != nil {
		return wire.Response{}, fmt.Errorf("connecting to port %d in the sandbox: %w", req.Port, err)
	}
	defer c.Close()
	f, err := c.(*net.TCPConn).File()
	if err != nil {
		return wire.Response{}, fmt.Errorf("taking the socket of port %d's connection: %w", req.Port, err)
	}
	return wire.Response{File: f}, nil
}

// reply sends resp, with its descriptor when it has one, which it closes.
func (s *supervisor) reply(resp wire.Response) error {
	if resp.File == nil {
		return s.out.Write(resp)
	}
	defer resp.File.Close()
	resp.Fd = true
	return s.out.WriteFd(resp, int(resp.File.Fd()))
}

// ctlFile is the control socket, which can carry a descriptor.
type ctlFile struct{ *os.File }

// WriteFd writes p with fd attached to its first byte (SCM_RIGHTS); it
// may write less than p, as a write may.
func (c ctlFile) WriteFd(p []byte, fd int) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var serr error
	err = rc.Write(func(s uintptr) bool {
		n, serr = unix.SendmsgN(int(s), p, unix.UnixRights(fd), nil, 0)
		return serr != unix.EAGAIN
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return 0, fmt.Errorf("sending a descriptor on the control socket: %w", err)
	}
	return n, nil
}

// WriteFd passes a descriptor through the meter to the control socket.
func (m meter) WriteFd(p []byte, fd int) (int, error) {
	fw, ok := m.rw.(wire.FdWriter)
	if !ok {
		return 0, fmt.Errorf("sending a descriptor: the control stream (%T) cannot carry one", m.rw)
	}
	n, err := fw.WriteFd(p, fd)
	m.moved.Add(uint64(n))
	return n, err
}
