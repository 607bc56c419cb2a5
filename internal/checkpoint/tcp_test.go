package checkpoint

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
	"golang.org/x/sys/unix"
)

// TestDumpLoopbackTCP dumps a sandbox (a namespace of its own) whose
// process holds a TCP connection over its loopback, both ends (a Jupyter
// kernel's, a language server's), and restores it: the pair goes on
// talking, with the token it drew. criu before 4.2 dumps no inet socket
// on a kernel from 6.16 (ErrInetSockets): there the dump is refused
// before criu runs, naming the process, and the sandbox runs on.
func TestDumpLoopbackTCP(t *testing.T) {
	privtest.RequireRoot(t)
	criu := testCriu(t)
	rt, _ := newTestRuntime(t, testDiskDir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conf := sandbox.Config{HostBase: true}
	sb := createDumpable(ctx, t, rt, conf)
	defer sb.Close()
	// Each number goes through the connection before it is written.
	const start = `setsid python3 -c '
import os, socket, time
token, n = os.urandom(8).hex(), 0
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
c = socket.create_connection(srv.getsockname()); s, _ = srv.accept()
while True:
    n += 1
    c.sendall(b"%d\n" % n)
    got = s.recv(64).decode().strip()
    with open("/tmp/tcp.new", "w") as f:
        f.write("%s %s" % (token, got))
    os.rename("/tmp/tcp.new", "/tmp/tcp")
    time.sleep(0.02)
' </dev/null >/dev/null 2>&1 &`
	startCounter(ctx, t, sb, start)
	read := func(s *sandbox.Sandbox, after int) counter { return readCounter(ctx, t, s, "/tmp/tcp", after) }
	at := read(sb, 3)
	dir := t.TempDir()
	thaw, err := sb.Freeze(ctx)
	if err != nil {
		thaw()
		t.Fatal(err)
	}
	_, dumpErr := criu.DumpSandbox(ctx, sb, dir)
	if err := thaw(); err != nil {
		t.Fatalf("thawing: %v", err)
	}
	if after := read(sb, at.n); after.token != at.token {
		t.Errorf("the dumped sandbox's pair after the dump: %v, want token %q", after, at.token)
	}
	if !criu.inetOK() {
		if !errors.Is(dumpErr, ErrInetSockets) {
			t.Fatalf("criu %s on kernel %s: the dump's error %v, want ErrInetSockets", criu.Version, uname(t), dumpErr)
		}
		if err := criu.CheckSockets(sb); !errors.Is(err, ErrInetSockets) || !strings.Contains(err.Error(), "python3") {
			t.Errorf("CheckSockets: %v, want ErrInetSockets naming python3", err)
		}
		t.Logf("criu %s on kernel %s: the dump is refused, as it must be: %v", criu.Version, uname(t), dumpErr)
		return
	}
	if err := criu.CheckSockets(sb); err != nil {
		t.Errorf("CheckSockets: %v", err)
	}
	if dumpErr != nil {
		t.Fatal(dumpErr)
	}
	restorer, err := criu.Restorer(dir)
	if err != nil {
		t.Fatal(err)
	}
	// No layer of the writes: the restored pair writes /tmp/tcp anew.
	c, err := rt.Restore(ctx, conf, restorer)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := read(c, at.n); got.token != at.token {
		t.Errorf("the restored pair: %v, want token %q past %d", got, at.token, at.n)
	}
	if err := c.Close(); err != nil {
		t.Errorf("closing the restored sandbox: %v", err)
	}
}

func uname(t *testing.T) string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	return unix.ByteSliceToString(u.Release[:])
}
