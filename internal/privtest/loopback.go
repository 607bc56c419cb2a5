package privtest

import (
	"net"
	"testing"
)

// ServeOK serves "ok" to every connection on a port of 127.0.0.1 until the
// test ends, and returns the port: a loopback target for network-rule
// tests, the only kind of target they may reach.
func ServeOK(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("ok"))
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}
