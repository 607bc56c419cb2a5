package integrity

import (
	"strings"
	"testing"
)

// sympyTestCmd is the SWE-bench spec's test command of sympy/sympy.
const sympyTestCmd = "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose"

// TestSympyCanaryDraw: SymPy's bin/test gets a canary of two test_
// functions beside the test patch's first test module; placed, it runs
// the harness's command in every selected file; a directive that is not a
// test module leaves it in a file of its own.
func TestSympyCanaryDraw(t *testing.T) {
	files := []string{"sympy/core/basic.py", "sympy/core/tests/test_basic.py", "sympy/core/tests/test_expr.py"}
	c := NewCanary(sympyTestCmd, files)
	if !c.Active() || c.runner != runnerSympy || c.Dir != "sympy/core/tests" || !strings.HasPrefix(c.File, "sympy/core/tests/test_") ||
		c.Command != sympyTestCmd+" '"+c.File+"'" || !strings.HasPrefix(c.Pass, "test_") || !strings.HasPrefix(c.Fail, "test_") {
		t.Fatalf("%+v", c)
	}
	for _, s := range []string{c.File, c.Pass, c.Fail, c.Source(), c.Script()} {
		if strings.Contains(strings.ToLower(s), "msb") && s != c.Script() || strings.Contains(s, c.Token) && s != c.Script() {
			t.Errorf("%q names msb or the token %s", s, c.Token)
		}
	}
	if !strings.Contains(c.Source(), "def "+c.Pass+"():") || strings.Contains(c.Source(), "class ") || strings.Contains(c.Source(), "import") {
		t.Errorf("source:\n%s", c.Source())
	}
	mods := files[1:]
	harness := sympyTestCmd + " " + strings.Join(mods, " ")
	p := c.Place(harness, mods, nil)
	if !p.Placed() || p.File != mods[0] || p.Command != harness {
		t.Fatalf("not placed: %+v", p)
	}
	script := p.Script()
	for _, m := range mods {
		if !strings.Contains(script, "cat >> '"+m+"'") {
			t.Errorf("%s gets no canary:\n%s", m, script)
		}
	}
	if strings.Count(script, "def "+c.Fail+"():") != len(mods) || !strings.Contains(script, "\n"+harness+"\n") {
		t.Errorf("script:\n%s", script)
	}
	if u := c.Place(harness+" sympy/core/tests/helpers.py", append(mods, "sympy/core/tests/helpers.py"), nil); u.Placed() {
		t.Errorf("placed beside a directive that is no test module: %+v", u)
	}
	if n := NewCanary("./bin/test", []string{"doc/x.rst"}); n.Active() || !strings.HasPrefix(n.Note, "canary skipped: ") {
		t.Errorf("no test module: %+v", n)
	}
}

// TestStrictSympy: a placed SymPy canary reports once per file; a file
// whose failing canary passed, or whose passing one did not pass, counts
// whatever the parser kept (the last line of each name).
func TestStrictSympy(t *testing.T) {
	c := NewCanary(sympyTestCmd, []string{"sympy/core/tests/test_basic.py"})
	clean := map[string]string{c.Pass: "PASSED", "sympy/core/tests/test_basic.py:" + c.Fail: "FAILED"}
	out := "sympy/core/tests/test_basic.py[2] \n" + c.Pass + " ok\n" + c.Fail + " F     [FAIL]\n"
	if r := c.Judge(c.StrictSympy(out, clean), true); len(r) != 0 {
		t.Errorf("clean run flagged: %q", r)
	}
	for _, bad := range []string{
		out + "sympy/core/tests/test_expr.py[2] \n" + c.Pass + " ok\n" + c.Fail + " ok     [OK]\n",
		"sympy/core/tests/test_basic.py[2] \n" + c.Pass + " E\n" + c.Fail + " F     [FAIL]\n" + out,
	} {
		if r := c.Judge(c.StrictSympy(bad, clean), true); len(r) == 0 {
			t.Errorf("not flagged:\n%s", bad)
		}
	}
	py := NewCanary("pytest", []string{"tests/test_a.py"})
	if m := py.StrictSympy(py.Fail+" ok\n", clean); len(m) != len(clean) || m[c.Pass] != "PASSED" {
		t.Errorf("another runner's statuses changed: %v", m)
	}
}

// TestToxCanary: a tox command that passes arguments to its commands
// (after --) gets the pytest canary and channel; the canary's own file
// goes beside the first test module, not a file of a test root.
func TestToxCanary(t *testing.T) {
	cmd := "tox --current-env -epy39 -v --"
	c := NewCanary(cmd, []string{"sphinx/ext/autodoc/__init__.py", "tests/roots/test-ext-autodoc/target/private.py", "tests/test_ext_autodoc_private_members.py"})
	if !c.Active() || c.runner != "" || c.Dir != "tests" || c.Import != "tests.test_ext_autodoc_private_members" || c.Command != cmd+" '"+c.File+"'" {
		t.Fatalf("%+v", c)
	}
	if !strings.Contains(c.Source(), "class "+c.Class+"(unittest.TestCase)") {
		t.Errorf("source:\n%s", c.Source())
	}
	mods := []string{"tests/test_ext_autodoc.py"}
	if p := c.Place(cmd+" "+mods[0], mods, map[string]string{"tests/test_ext_autodoc.py::test_x": "PASSED"}); !p.Placed() || p.File != mods[0] {
		t.Errorf("not placed: %+v", p)
	}
	if !NewChannel(cmd).Active() || !NewChannel("tox --current-env -epy39 -v -- tests/test_a.py").Active() || NewChannel("tox -e py39").Active() {
		t.Error("channel not drawn for tox ... -- (or drawn without --)")
	}
}
