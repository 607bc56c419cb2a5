package engine

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/spec"
)

func TestMain(m *testing.M) { demotest.Main(m, gen) }

// TestRootless reruns the engine tests and the snapshot, rollback and
// image-user tests as an unprivileged user with subordinate ids (calc owns
// /srv/calc in TestImageRepoSandbox there too), in one process: the demo's
// environment is built once for all of them, as in root mode, not once in
// each of seven.
func TestRootless(t *testing.T) {
	privtest.Unprivileged(t, "^(TestEngine.*|Test(Fork|Snapshot)Processes|"+
		"TestSnapshot(Fork|Consistent|Rollback|RestartAndGC|ForkQuota|ForkFails|AsBase|LongFreeze|User|SessionProbe|ForkSessions|Pending)|"+
		"TestRollback(Keeps(Sandbox|NetPolicy)|ForkHostnames|InPlace)|"+
		"TestImage(UserHome|PrivateFork|RepoSandbox))$")
}

// gen is the demo project and a cache (under its dir) shared by the
// tests of the binary: the environment is built once.
var gen = demotest.New("msb-engine-test-")

func generated(t testing.TB) *demo.Generated { return gen.Generated(t) }

// openEngine opens an engine on the shared cache with the demo's specs
// (plus extra YAML) and its instances; it is closed after the test, which
// fails if a sandbox is still open then.
func openEngine(t testing.TB, extra string, edit func(*Config)) *Engine {
	t.Helper()
	g := generated(t)
	ov, err := spec.ParseOverrides([]byte(demo.SpecYAML(g.PyVersion) + extra))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{StateDir: privtest.StateDir(t), Cache: CacheConfig{Dir: filepath.Join(gen.Dir(), "cache")}, Overrides: ov, TestTimeout: time.Minute}
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
