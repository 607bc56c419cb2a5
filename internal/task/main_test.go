package task

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/spec"
)

func TestMain(m *testing.M) { demotest.Main(m, gen) }

// TestRootless reruns the task tests of the demo project and of image
// instances (TestImageInstance; TestImageRepoElsewhere, where calc owns
// /srv/calc with subordinate ids) as an unprivileged user, in one
// process: the demo's environment is built once for all of them.
func TestRootless(t *testing.T) {
	privtest.Unprivileged(t, "^Test(Evaluate|Tolerated|SWESmith|Diff|ApplyAlready|ExploitSuite$|ExploitSuiteForked$|CanarySecrecy$|CanarySecrecyInline$|CanarySecrecyForked$|Canary(Beside|BesidePlacedAgain|SandboxFailure|Cancel|Modes)$|Image(Instance|RepoElsewhere)$)")
}

// gen is the demo project of the test binary; fixture adds a runtime and
// a cache in its dir, shared by the tests (the environment is built once).
var gen = demotest.New("msb-task-test-")

type fixture struct {
	gen *demo.Generated
	env Env
}

var (
	fixOnce sync.Once
	fix     *fixture
	fixErr  error
)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	g := gen.Generated(t)
	fixOnce.Do(func() {
		rt, err := sandbox.NewRuntime(sandbox.RuntimeOptions{StateDir: filepath.Join(gen.Dir(), "state")})
		if err != nil {
			fixErr = err
			return
		}
		gen.OnClose(rt.Close)
		cache, err := envcache.Open(envcache.Options{Dir: filepath.Join(gen.Dir(), "cache"), Runtime: rt})
		if err != nil {
			fixErr = err
			return
		}
		fix = &fixture{gen: g, env: Env{Runtime: rt, Cache: cache}}
	})
	if fixErr != nil {
		t.Fatal(fixErr)
	}
	return fix
}

// overrides are the demo's spec file plus extra YAML.
func (f *fixture) overrides(t *testing.T, extra string) *spec.Overrides {
	t.Helper()
	ov, err := spec.ParseOverrides([]byte(demo.SpecYAML(f.gen.PyVersion) + extra))
	if err != nil {
		t.Fatal(err)
	}
	return ov
}

func (f *fixture) task(t *testing.T, i int, extra string) *Task {
	t.Helper()
	tk, err := New(f.gen.Instances[i], f.overrides(t, extra))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// open opens the agent's sandbox of tk, closed when the test ends.
func (f *fixture) open(t *testing.T, tk *Task) *Sandbox {
	t.Helper()
	sb, err := Open(context.Background(), f.env, tk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

func opts() EvalOptions { return EvalOptions{TestTimeout: time.Minute} }

func ptr(s string) *string { return &s }
