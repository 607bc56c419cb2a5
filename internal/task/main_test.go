package task

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/envcache"
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
	if fix != nil {
		if err := sandbox.RemoveAll(fix.dir); err != nil {
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

// TestRootless reruns the task tests as an unprivileged user.
func TestRootless(t *testing.T) {
	privtest.Unprivileged(t, "^Test(Evaluate|Tolerated|SWESmith|Diff|ApplyAlready)")
}

// fixture is a generated project, its instances and a cache shared by the
// tests of a test binary (the environment is built once).
type fixture struct {
	gen *demo.Generated
	env Env
	dir string
}

var (
	fixOnce sync.Once
	fix     *fixture
	fixErr  error
)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	fixOnce.Do(func() {
		dir, err := os.MkdirTemp(os.Getenv(privtest.StateBaseEnv), "msb-task-test-")
		if err != nil {
			fixErr = err
			return
		}
		f := &fixture{dir: dir}
		if f.gen, fixErr = demo.Generate(context.Background(), filepath.Join(dir, "gen")); fixErr != nil {
			return
		}
		rt, err := sandbox.NewRuntime(sandbox.RuntimeOptions{StateDir: filepath.Join(dir, "state")})
		if err != nil {
			fixErr = err
			return
		}
		cache, err := envcache.Open(envcache.Options{Dir: filepath.Join(dir, "cache"), Runtime: rt})
		if err != nil {
			fixErr = err
			return
		}
		f.env = Env{Runtime: rt, Cache: cache}
		fix = f
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

func opts() EvalOptions { return EvalOptions{TestTimeout: time.Minute} }

func ptr(s string) *string { return &s }
