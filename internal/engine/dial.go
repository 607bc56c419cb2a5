package engine

import (
	"context"
	"net"
)

// DialTCP connects to port on the sandbox's loopback as a process inside
// would (sandbox.Sandbox.DialTCP); sandbox.ErrRefused when nothing listens
// there. The dial counts as activity of the sandbox; the connection after
// it does not.
func (s *Sandbox) DialTCP(ctx context.Context, port int) (net.Conn, error) {
	defer s.use()()
	return s.sbox().DialTCP(ctx, port)
}
