package task

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/store"

	"github.com/minisandbox/msb/internal/grading/integrity"
	"github.com/minisandbox/msb/internal/spec"
)

// TestForkSplit: which eval steps let the forked canary split the eval
// script at its test command (every step of the built-in SWE-bench specs
// does), and which do not, with the word that says why.
func TestForkSplit(t *testing.T) {
	for _, c := range []struct {
		step   string
		replay bool   // set again in each fork
		why    string // "" when the split is safe
	}{
		{"export LANG=en_US.UTF-8", true, ""},
		{"export LANGUAGE=en_US:en", true, ""},
		{`export A="b c" B='d;e'`, true, ""},
		{"python -m pip install -e .", false, ""},
		{"python -m pip install -v --no-use-pep517 --no-build-isolation -e .", false, ""},
		{"sed -i '/en_US.UTF-8/s/^# //g' /etc/locale.gen && locale-gen", false, ""},
		{"python setup.py build; python setup.py install", false, ""},
		{"make -j4 2>&1 | tee build.log", false, ""},
		{"CFLAGS=-O0 python setup.py develop", false, ""},
		{"python -c 'import os; os.chdir(\"x\")'", false, ""},
		{"export PATH=/opt/bin:$PATH", false, "export"},
		{"export V=$(cat VERSION)", false, "export"},
		{"source /opt/venv/bin/activate", false, "source"},
		{". ./env.sh", false, "."},
		{"cd build && make", false, "cd"},
		{"make && cd build", false, "cd"},
		{"conda activate testbed", false, "conda"},
		{"set -e", false, "set"},
		{"FOO=bar", false, "an assignment"},
		{"redis-server &", false, "a background job"},
		{"ulimit -n 4096", false, "ulimit"},
		{"$TOOL build", false, "$TOOL"},
		{"eval \"$(pyenv init -)\"", false, "eval"},
		{"cat > x <<EOF\nhi\nEOF", false, "a here-document"},
	} {
		tk := &Task{Spec: spec.Spec{EvalCommands: []string{c.step}}}
		replay, why := forkSplit(tk)
		if (c.why == "") != (why == "") || c.why != "" && !strings.Contains(why, "("+c.why+")") {
			t.Errorf("%q: why %q, want %q", c.step, why, c.why)
		}
		if got := len(replay) == 1; got != c.replay {
			t.Errorf("%q: replayed %v, want %v", c.step, got, c.replay)
		}
	}
}

// TestForkedScripts: the set-up's script is the harness's up to its test
// command; each child's sets the shell's state without a trace, then runs
// the rest of the harness's script (or the canary) with it.
func TestForkedScripts(t *testing.T) {
	tk := &Task{Spec: spec.Spec{TestCmd: "pytest -rA", Env: map[string]string{"A": "1"},
		EvalCommands: []string{"export LANG=C.UTF-8", "python -m pip install -e ."}}}
	whole := evalScript(tk, "/testbed", integrity.Channel{}, "")
	setup := forkedPrelude(tk, "/testbed")
	cut := strings.Index(whole, "echo '>>>>> Start Test Output'")
	if !strings.HasPrefix(setup, whole[:cut]) || !strings.HasSuffix(setup, "{ set +x; } 2>/dev/null\nexit 97\n") {
		t.Fatalf("set-up's script:\n%s\nthe harness's:\n%s", setup, whole)
	}
	replay, _ := forkSplit(tk)
	tests := forkedTests(tk, "/testbed", replay, integrity.Channel{})
	head, rest, ok := strings.Cut(tests, "set -x\n")
	if !ok || !strings.HasSuffix(whole, rest) || strings.Contains(head, "pip install") || !strings.Contains(head, "export LANG=C.UTF-8") ||
		!strings.Contains(head, "export A=1") || !strings.Contains(head, "set -uo pipefail\ncd /testbed\n") {
		t.Fatalf("tests' script:\n%s\nthe harness's:\n%s", tests, whole)
	}
}

// testFork is EvalOptions.Fork for this package's tests, which cannot
// import the engine: what the engine's evalFork does with its snapshot
// machinery, in short (an evaluation sandbox runs as root, so its
// writable layer is staged as a directory): sb frozen while its writable
// layer is staged and published, children started by Start over the
// layers below it and that one.
func testFork(env Env) func(context.Context, *Sandbox) (ForkPoint, error) {
	return func(ctx context.Context, sb *Sandbox) (ForkPoint, error) {
		st := env.Cache.Store()
		conf := sb.Config()
		if sb.MapsSubIDs() {
			return ForkPoint{}, errors.New("testFork: a sandbox that maps subordinate ids")
		}
		var layers []store.LayerID
		for _, p := range conf.Layers {
			id, ok := st.TreeLayer(p)
			if !ok {
				return ForkPoint{}, fmt.Errorf("testFork: layer %s is not the store's", p)
			}
			layers = append(layers, id)
		}
		dir, err := sb.WritableDir()
		if err != nil {
			return ForkPoint{}, err
		}
		thaw, err := sb.Freeze(ctx)
		if err != nil {
			return ForkPoint{}, err
		}
		parents := slices.Clone(layers)
		slices.Reverse(parents)
		data, err := st.StageDir(ctx, dir, store.CommitOptions{Parents: parents, MapOwner: envcache.OwnerAsRoot()})
		if terr := thaw(); err == nil {
			err = terr
		}
		if err != nil {
			return ForkPoint{}, err
		}
		if err := st.Publish(ctx, "", data); err != nil {
			return ForkPoint{}, err
		}
		all := append(layers, data.ID)
		held, err := st.Lease(ctx, all...)
		if err != nil {
			return ForkPoint{}, err
		}
		start := func(ctx context.Context) (*Sandbox, error) {
			lease, err := st.Lease(ctx, all...)
			if err != nil {
				return nil, err
			}
			c := conf
			c.Layers = make([]string, len(all))
			for i, id := range all {
				if c.Layers[i], err = st.Materialize(ctx, id); err != nil {
					lease.Release()
					return nil, err
				}
			}
			c.UpperDir, c.KeepUpper, c.Hostname = "", false, ""
			child, err := Start(ctx, env, sb.Task, c, lease)
			if err != nil {
				lease.Release()
			}
			return child, err
		}
		return ForkPoint{Start: start, Release: sync.OnceValue(func() string { held.Release(); return "released" })}, nil
	}
}
