package engine

import (
	"context"
	"net"
	"time"
)

// DialTCP connects to port on the sandbox's loopback as a process inside
// would (sandbox.Sandbox.DialTCP); sandbox.ErrRefused when nothing listens
// there. The dial counts as activity of the sandbox, and so does each read
// or write that moves bytes on the connection after it: traffic to a
// server in the sandbox keeps it from its idle timeout, a connection left
// open and silent does not.
func (s *Sandbox) DialTCP(ctx context.Context, port int) (net.Conn, error) {
	defer s.use()()
	c, err := s.sbox().DialTCP(ctx, port)
	if err != nil {
		return nil, err
	}
	return &activeConn{Conn: c, s: s}, nil
}

// Hold marks an operation on the sandbox in flight, as an exec call is,
// until release runs: the sandbox is not idle meanwhile, and its idle time
// starts at the release. Ingress holds a sandbox for each request it
// carries to the sandbox's port.
func (s *Sandbox) Hold() (release func()) { return s.use() }

// activeConn is a connection into the sandbox whose traffic is activity.
type activeConn struct {
	net.Conn
	s *Sandbox
}

func (c *activeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.s.touch()
	}
	return n, err
}

func (c *activeConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.s.touch()
	}
	return n, err
}

// touch marks the sandbox active now without an operation in flight.
func (s *Sandbox) touch() { s.lastActive.Store(time.Now().UnixNano()) }
