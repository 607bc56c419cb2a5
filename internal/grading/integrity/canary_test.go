package integrity

import (
	"strings"
	"testing"
)

// TestNewCanary: pytest and unittest commands get a canary beside the
// first Python test file, with fresh random names each time; any other
// runner, or a test patch without a Python file, gets a note instead.
func TestNewCanary(t *testing.T) {
	for _, cmd := range []string{"pytest -rA", "python -m pytest --no-header", "python -m unittest -v", "/opt/venv/bin/pytest"} {
		c := NewCanary(cmd, []string{"docs/x.rst", "tests/unit/test_a.py"})
		if !c.Active() || c.Dir != "tests/unit" || !strings.HasPrefix(c.File, "tests/unit/test_msb_") || c.Import != "tests.unit.test_a" || c.Command != cmd+" '"+c.File+"'" {
			t.Errorf("%s: %+v", cmd, c)
		}
		if d := NewCanary(cmd, []string{"tests/unit/test_a.py"}); d.Token == c.Token {
			t.Errorf("two canaries share the token %s", c.Token)
		}
	}
	for _, tc := range []struct{ cmd, file string }{
		{"./tests/runtests.py --verbosity 2", "tests/x/tests.py"},
		{"bin/test -C --verbose", "sympy/x/test_y.py"},
		{"tox --current-env -epy39 -v --", "tests/test_a.py"},
		{"pytest -rA", "tests/data.json"},
	} {
		if c := NewCanary(tc.cmd, []string{tc.file}); c.Active() || !strings.HasPrefix(c.Note, "canary skipped: ") || c.Script() != "" {
			t.Errorf("%s: %+v", tc.cmd, c)
		}
	}
}

// TestCanaryJudge: only the failing test failed and the passing test
// passed, with nothing else reported, is clean.
func TestCanaryJudge(t *testing.T) {
	c := NewCanary("pytest", []string{"tests/test_a.py"})
	id := func(name string) string { return c.File + "::" + c.Class + "::" + name }
	for _, tc := range []struct {
		name     string
		statuses map[string]string
		markers  bool
		want     int
	}{
		{"clean", map[string]string{id(c.Pass): "PASSED", id(c.Fail): "FAILED"}, true, 0},
		{"error counts as failing", map[string]string{id(c.Pass): "PASSED", id(c.Fail): "ERROR"}, true, 0},
		{"failing passed", map[string]string{id(c.Pass): "PASSED", id(c.Fail): "PASSED"}, true, 1},
		{"both missing", map[string]string{}, true, 2},
		{"a test that did not run", map[string]string{id(c.Pass): "PASSED", id(c.Fail): "FAILED", "tests/test_a.py::test_x": "PASSED"}, true, 1},
		{"no markers", nil, false, 1},
	} {
		if got := c.Judge(tc.statuses, tc.markers); len(got) != tc.want {
			t.Errorf("%s: %q, want %d reasons", tc.name, got, tc.want)
		}
	}
	if out, ok := c.Output("x\n" + c.Start() + "\nrun\n" + c.End() + "\n"); !ok || out != "run\n" {
		t.Errorf("output %q %v", out, ok)
	}
}
