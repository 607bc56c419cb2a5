package integrity

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestNewCanary: pytest and unittest commands get a canary beside the
// first Python test file, with fresh random names each time that say
// nothing of msb or the token (only the log markers carry it); any other
// runner, or a test patch without a Python file, gets a note instead.
func TestNewCanary(t *testing.T) {
	for _, cmd := range []string{"pytest -rA", "python -m pytest --no-header", "python -m unittest -v", "/opt/venv/bin/pytest"} {
		c := NewCanary(cmd, []string{"docs/x.rst", "tests/unit/test_a.py"})
		if !c.Active() || c.Dir != "tests/unit" || !strings.HasPrefix(c.File, "tests/unit/test_") || c.Import != "tests.unit.test_a" || c.Command != cmd+" '"+c.File+"'" {
			t.Errorf("%s: %+v", cmd, c)
		}
		for _, s := range []string{c.File, c.Class, c.Pass, c.Fail, c.Source()} {
			if strings.Contains(strings.ToLower(s), "msb") || strings.Contains(s, c.Token) {
				t.Errorf("%s: %q names msb or the token %s", cmd, s, c.Token)
			}
		}
		if !strings.Contains(c.Start(), c.Token) || !c.Is(c.File+"::"+c.Class+"::"+c.Fail) || c.Is(c.File+"::"+c.Class+"::test_other") {
			t.Errorf("%s: markers %q or Is wrong for %+v", cmd, c.Start(), c)
		}
		if d := NewCanary(cmd, []string{"tests/unit/test_a.py"}); d.Token == c.Token {
			t.Errorf("two canaries share the token %s", c.Token)
		}
	}
	for _, tc := range []struct{ cmd, file string }{
		{"./tests/runtests.py --verbosity 2", "tests/x/tests.py"},
		{"tox -e py39", "tests/test_a.py"},
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

// TestDrawNames: names are the words asked for, spelled three ways, and
// no spelling of one contains another's.
func TestDrawNames(t *testing.T) {
	for range 200 {
		ns := DrawNames(4, 3)
		if len(ns) != 4 {
			t.Fatalf("%d names", len(ns))
		}
		for i, n := range ns {
			if len(n) != 3 || n.Snake() != strings.Join(n, "_") || n.Kebab() != strings.Join(n, "-") || strings.ToLower(n.Camel()) != strings.Join(n, "") {
				t.Fatalf("name %q: %s %s %s", n, n.Snake(), n.Kebab(), n.Camel())
			}
			for j, o := range ns {
				if i != j && (strings.Contains(n.Snake(), o.Snake()) || strings.Contains(n.Camel(), o.Camel())) {
					t.Fatalf("%s contains %s", n.Snake(), o.Snake())
				}
			}
		}
	}
}

// TestCanaryPlace: a Python canary is placed in the harness's run when
// every Python directive is a test module, hosted by the first whose tests
// passed there, and runs the harness's command as it is; any other
// selection keeps the canary's own file.
func TestCanaryPlace(t *testing.T) {
	cmd := "pytest -rA tests/test_a.py tests/test_b.py"
	c := NewCanary("pytest -rA", []string{"tests/test_a.py", "tests/test_b.py"})
	p := c.Place(cmd, []string{"tests/test_a.py", "tests/test_b.py", "tests/data.cfg"}, map[string]string{"tests/test_a.py::test_x": "FAILED", "tests/test_b.py::T::test_y": "PASSED"})
	if !p.Placed() || p.File != "tests/test_b.py" || p.Command != cmd || p.Pass != c.Pass || p.Token != c.Token {
		t.Fatalf("placed: %+v", p)
	}
	s := p.Script()
	if strings.Count(s, "cat >> ") != 2 || !strings.Contains(s, "\n"+cmd+"\n") || strings.Contains(s, c.File) || strings.Count(s, "class "+c.Class) != 1 {
		t.Errorf("script:\n%s", s)
	}
	u := NewCanary("python -m unittest -v", []string{"tests/test_a.py"})
	if d := u.Place("python -m unittest -v tests/test_a.py", []string{"tests/test_a.py"}, map[string]string{"test_x (tests.test_a.T.test_x)": "PASSED"}); !d.Placed() || d.File != "tests/test_a.py" {
		t.Errorf("unittest: %+v", d)
	}
	if d := u.Place("python -m unittest -v tests/test_a.py", []string{"tests/test_a.py"}, map[string]string{"tests/test_a.py": "ERROR"}); d.Placed() {
		t.Errorf("placed where the harness's run passed nothing: %+v", d)
	}
	for _, dirs := range [][]string{{"tests/conftest.py", "tests/test_a.py"}, {"tests/helpers.py"}, {"docs/x.rst"}, nil} {
		if p := c.Place(cmd, dirs, nil); p.Placed() || p.File != c.File || p.Command != c.Command {
			t.Errorf("%q: placed %+v", dirs, p)
		}
	}
	id := func(name string) string { return p.File + "::" + p.Class + "::" + name }
	if r := p.Judge(map[string]string{id(p.Pass): "PASSED", id(p.Fail): "FAILED", "tests/test_a.py": "ERROR"}, true); len(r) != 0 {
		t.Errorf("a module failing in both runs flagged: %q", r)
	}
	if r := p.Judge(map[string]string{id(p.Pass): "PASSED", id(p.Fail): "FAILED", "tests/test_a.py::test_x": "PASSED"}, true); len(r) != 1 {
		t.Errorf("a passing test that did not run not flagged: %q", r)
	}
}

// TestPlacedCanaryRuns runs a placed canary's script under the host's
// python3, with unittest and with pytest, in a repository of test modules
// (one imports another's base class; under unittest one fails to import):
// only the canary's two tests run, the failing one fails.
func TestPlacedCanaryRuns(t *testing.T) {
	py := privtest.PytestPython(t)
	files := map[string]string{
		"pkg/__init__.py":   "",
		"pkg/mod.py":        "def double(x):\n    return 2 * x\n",
		"tests/__init__.py": "",
		"tests/test_a.py":   "import unittest\nfrom pkg.mod import double\n\n\nclass Base(unittest.TestCase):\n    def test_double(self):\n        self.assertEqual(double(2), 4)\n\n\ndef test_plain():\n    assert double(1) == 2\n",
		"tests/test_b.py":   "from tests.test_a import Base\n\n\nclass TestMore(Base):\n    def test_more(self):\n        self.assertEqual(1, 1)\n\n\nclass TestPlain:\n    def test_p(self):\n        assert True\n",
		"tests/test_c.py":   "raise ImportError('no such dependency')\n",
	}
	for _, tc := range []struct {
		runner, pass, fail string
		mods               []string
	}{
		{py + " -m unittest -v", "... ok", "... FAIL", []string{"tests/test_c.py", "tests/test_a.py", "tests/test_b.py"}},
		{py + " -m pytest -rA -p no:cacheprovider", "PASSED ", "FAILED ", []string{"tests/test_a.py", "tests/test_b.py"}},
	} {
		dir := t.TempDir()
		for name, body := range files {
			if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		c := NewCanary(tc.runner, tc.mods).Place(tc.runner+" "+strings.Join(tc.mods, " "), tc.mods, map[string]string{"tests/test_b.py::TestMore::test_more": "PASSED"})
		if !c.Placed() || c.File != "tests/test_b.py" {
			t.Fatalf("%s: not placed: %+v", tc.runner, c)
		}
		cmd := exec.Command("bash", "-c", c.Script())
		cmd.Dir = dir
		out, _ := cmd.CombinedOutput()
		log, ok := c.Output(string(out))
		if !ok {
			t.Fatalf("%s: no markers:\n%s", tc.runner, out)
		}
		var pass, fail bool
		for _, l := range strings.Split(log, "\n") {
			for _, test := range []string{"test_double", "test_plain", "test_more", "test_p"} {
				if strings.Contains(l, test+" ") || strings.HasSuffix(l, "::"+test) {
					t.Errorf("%s: the harness's test %s ran: %s", tc.runner, test, l)
				}
			}
			pass = pass || strings.Contains(l, c.Pass) && strings.Contains(l, tc.pass)
			fail = fail || strings.Contains(l, c.Fail) && strings.Contains(l, tc.fail)
		}
		if !pass || !fail {
			t.Errorf("%s: the canary's tests did not pass and fail (%v %v):\n%s", tc.runner, pass, fail, log)
		}
	}
}
