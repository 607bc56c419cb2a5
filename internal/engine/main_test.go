package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/sandbox/sbinit"
	"github.com/minisandbox/msb/internal/spec"
)

func TestMain(m *testing.M) {
	if sbinit.IsChild() {
		sbinit.Main()
	}
	code := m.Run()
	if gen.dir != "" {
		if err := sandbox.RemoveAll(gen.dir); err != nil {
			fmt.Fprintln(os.Stderr, "removing the fixture:", err)
			code = 1
		}
	}
	if code == 0 {
		if err := privtest.CheckLeaks(""); err != nil {
			fmt.Fprintln(os.Stderr, "leak check:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// TestRootless reruns the engine tests as an unprivileged user.
func TestRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestEngine")
}

// gen is the demo project and a cache shared by the tests of the binary
// (the environment is built once).
var gen struct {
	once sync.Once
	dir  string
	g    *demo.Generated
	err  error
}

func generated(t *testing.T) *demo.Generated {
	t.Helper()
	gen.once.Do(func() {
		if gen.dir, gen.err = os.MkdirTemp(os.Getenv(privtest.StateBaseEnv), "msb-engine-test-"); gen.err == nil {
			gen.g, gen.err = demo.Generate(context.Background(), filepath.Join(gen.dir, "gen"))
		}
	})
	if gen.err != nil {
		t.Fatal(gen.err)
	}
	return gen.g
}

// openEngine opens an engine on the shared cache with the demo's specs
// (plus extra YAML) and its instances; it is closed after the test, which
// fails if a sandbox is still open then.
func openEngine(t *testing.T, extra string, edit func(*Config)) *Engine {
	t.Helper()
	g := generated(t)
	ov, err := spec.ParseOverrides([]byte(demo.SpecYAML(g.PyVersion) + extra))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{StateDir: privtest.StateDir(t), Cache: CacheConfig{Dir: filepath.Join(gen.dir, "cache")}, Overrides: ov, TestTimeout: time.Minute}
	if edit != nil {
		edit(&cfg)
	}
	e, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if n := len(e.Sandboxes(nil)); n > 0 {
			t.Errorf("%d sandboxes still open at the end of the test", n)
		}
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := e.Add(g.Instances...); err != nil {
		t.Fatal(err)
	}
	return e
}
