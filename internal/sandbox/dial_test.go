package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/session"
)

// echoServer starts a TCP server on 127.0.0.1:%d inside a sandbox that
// answers each line with "echo: " and the line, one thread a connection,
// and waits until it listens. It runs in a session, which keeps what it
// started (a one-shot exec ends its leftovers).
const echoServer = `python3 -c '
import socket, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", %d)); s.listen()
def serve(c):
    f = c.makefile("rwb")
    for line in f:
        f.write(b"echo: " + line); f.flush()
while True:
    threading.Thread(target=serve, args=(s.accept()[0],), daemon=True).start()
' >/dev/null 2>&1 &
for i in $(seq 300); do (echo > /dev/tcp/127.0.0.1/%d) 2>/dev/null && break; sleep 0.1; done`

// TestDialTCP: the host reaches a server listening on the sandbox's
// loopback through DialTCP, several connections at once beside the
// sandbox's other calls; a port nothing listens on is ErrRefused, a port
// out of range ErrInvalid. TestDialTCPRootless reruns it rootless.
func TestDialTCP(t *testing.T) {
	rt := testRuntime(t)
	sb := create(t, rt, Config{HostBase: true})
	const port = 8123
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sb.OpenSession(ctx, "server", SessionOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := sb.SessionExec(ctx, "server", session.ExecRequest{Command: fmt.Sprintf(echoServer, port, port), Timeout: 50 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("starting the server: %+v, %v", res, err)
	}
	var conns []net.Conn
	for range 3 {
		c, err := sb.DialTCP(ctx, port)
		if err != nil {
			t.Fatalf("dialing port %d: %v", port, err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	for i, c := range conns {
		c.SetDeadline(time.Now().Add(time.Minute))
		line := fmt.Sprintf("hello %d\n", i)
		if _, err := io.WriteString(c, line); err != nil {
			t.Fatalf("writing to connection %d: %v", i, err)
		}
		got, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || got != "echo: "+line {
			t.Fatalf("connection %d answered %q, %v; want %q", i, got, err, "echo: "+line)
		}
	}
	if got := mustOK(t, sb, "echo still here"); got != "still here\n" {
		t.Fatalf("exec beside the connections said %q", got)
	}
	if _, err := sb.DialTCP(ctx, port+1); !errors.Is(err, ErrRefused) {
		t.Fatalf("dialing port %d, where nothing listens: %v, want ErrRefused", port+1, err)
	}
	for _, p := range []int{0, 70000} {
		if _, err := sb.DialTCP(ctx, p); !errors.Is(err, ErrInvalid) {
			t.Fatalf("dialing port %d: %v, want ErrInvalid", p, err)
		}
	}
}

func TestDialTCPRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestDialTCP$")
}

// BenchmarkDialTCP: one DialTCP, a line echoed and a close, against the
// echo server on the sandbox's loopback.
func BenchmarkDialTCP(b *testing.B) {
	rt := testRuntime(b)
	sb := create(b, rt, Config{HostBase: true})
	const port = 8123
	ctx := context.Background()
	if err := sb.OpenSession(ctx, "server", SessionOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := sb.SessionExec(ctx, "server", session.ExecRequest{Command: fmt.Sprintf(echoServer, port, port), Timeout: 50 * time.Second}); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 64)
	b.ResetTimer()
	for range b.N {
		c, err := sb.DialTCP(ctx, port)
		if err != nil {
			b.Fatal(err)
		}
		io.WriteString(c, "x\n")
		if _, err := io.ReadAtLeast(c, buf, len("echo: x\n")); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}
