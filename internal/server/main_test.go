package server

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/client"
	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/spec"
)

func TestMain(m *testing.M) { demotest.Main(m, gen) }

// TestRootless reruns the daemon's API tests as an unprivileged user; with
// SoakEnv set, the soak alone at that size.
func TestRootless(t *testing.T) {
	run := "^TestServer"
	if os.Getenv(SoakEnv) != "" {
		run = "^TestServerSoak$"
	}
	privtest.UnprivilegedEnv(t, run, SoakEnv+"="+os.Getenv(SoakEnv))
}

// gen is the demo project and a cache (under its dir) shared by the
// tests of the binary: the environment is built once.
var gen = demotest.New("msb-server-test-")

func generated(t testing.TB) *demo.Generated { return gen.Generated(t) }

// daemon is a real msb serve in the test process: an engine on the demo's
// cache, a unix socket and a TCP listener with a token.
type daemon struct {
	e      *engine.Engine
	s      *Server
	dir    string
	sock   string
	tcp    string
	token  string
	unix   *client.Client // trusted: no token
	remote *client.Client // TCP, with the token
}

const testToken = "test-token-5f0c"

// startDaemon starts a daemon that is shut down after the test; the test
// fails if a sandbox is left then, or the socket is not removed.
func startDaemon(t *testing.T, edit func(*engine.Config), opts func(*Options)) *daemon {
	t.Helper()
	g := generated(t)
	ov, err := spec.ParseOverrides([]byte(demo.SpecYAML(g.PyVersion)))
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.Config{StateDir: privtest.StateDir(t), Cache: engine.CacheConfig{Dir: filepath.Join(gen.Dir(), "cache")}, Overrides: ov,
		TestTimeout: time.Minute, ReapInterval: 20 * time.Millisecond}
	if edit != nil {
		edit(&cfg)
	}
	e, err := engine.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Add(g.Instances...); err != nil {
		t.Fatal(err)
	}
	d := &daemon{e: e, dir: t.TempDir(), token: testToken}
	o := Options{Token: testToken, OutDir: filepath.Join(d.dir, "out"), ShutdownGrace: 5 * time.Second}
	if opts != nil {
		opts(&o)
	}
	d.s = New(e, o)
	d.sock = filepath.Join(d.dir, "msb.sock")
	ul, err := Listen("unix://"+d.sock, -1)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := Listen("127.0.0.1:0", -1)
	if err != nil {
		t.Fatal(err)
	}
	d.tcp = "http://" + tl.Addr().(*net.TCPAddr).String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.s.Serve(ctx, ul, tl) }()
	if d.unix, err = client.New("unix://"+d.sock, ""); err != nil {
		t.Fatal(err)
	}
	if d.remote, err = client.New(d.tcp, testToken); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.unix.Close()
		d.remote.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if _, err := os.Stat(d.sock); !os.IsNotExist(err) {
			t.Errorf("the socket %s is still there after shutdown", d.sock)
		}
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return d
}
