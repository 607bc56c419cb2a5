package integrity

import (
	"fmt"
	"path"
	"strings"
)

// A Python canary placed in the harness's run (Place) runs under the
// harness's own test command, with the harness's own selection: the
// command line of its run is the harness's, character for character, and
// no file is added to the repository. Every test module the command
// selects gets code appended that takes its tests out of the run (pytest
// skips names whose __test__ is false; unittest's loader asks the module's
// load_tests), and the host module, one whose tests the harness's run
// reported passing (so it imports), gets the canary's class after that.
// The modules still import what they import, so the code under test, the
// conftest.py files and the plugins load as in the harness's run.

// Place returns c placed in the harness's run when it can be: c is a
// Python canary, command is the harness's full test command, every
// directive that is a Python file is a test module (test_*.py, *_test.py,
// tests.py), and the harness's run (statuses: test id to status word)
// reported a passing test of one of them: the first such module is the
// host. Otherwise c is returned as it was, to run in a file of its own: a
// run that passed nothing (pytest stops at a module that fails to import)
// would stop the placed canary too.
func (c Canary) Place(command string, directives []string, statuses map[string]string) Canary {
	if !c.Active() || c.lang != "" {
		return c
	}
	if c.runner == runnerSympy {
		return c.placeSympy(command, directives)
	}
	var mods []string
	for _, d := range directives {
		if !strings.HasSuffix(d, ".py") {
			continue
		}
		if !testModule(d) || strings.HasPrefix(d, "/") || strings.Contains(d, "..") {
			return c
		}
		mods = append(mods, d)
	}
	if len(mods) == 0 {
		return c
	}
	for _, m := range mods {
		if passed(m, statuses) {
			c.modules, c.File, c.Dir, c.Command = mods, m, path.Dir(m), command
			break
		}
	}
	return c
}

// Placed reports whether c runs in the harness's run (Place).
func (c Canary) Placed() bool { return len(c.modules) > 0 }

// testModule reports whether p is named as pytest and unittest name test
// modules by default.
func testModule(p string) bool {
	b := path.Base(p)
	return b == "tests.py" || strings.HasPrefix(b, "test_") || strings.HasSuffix(b, "_test.py")
}

// passed reports whether statuses hold a passing test of module m, named
// by its path (pytest) or its dotted name (unittest).
func passed(m string, statuses map[string]string) bool {
	dotted := strings.ReplaceAll(strings.TrimSuffix(m, ".py"), "/", ".") + "."
	for id, st := range statuses {
		if st == "PASSED" && (strings.Contains(id, m) || strings.Contains(id, dotted)) {
			return true
		}
	}
	return false
}

// placedSource is what a placed canary appends to module m: the code that
// takes m's tests out of the run and, in the host, the canary's class.
func (c Canary) placedSource(m string) string {
	suite := "[]"
	if m == c.File {
		suite = fmt.Sprintf("[loader.loadTestsFromTestCase(%s)]", c.Class)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `

import unittest as _unittest


def load_tests(loader, tests, pattern):
    return loader.suiteClass(%s)


for _name, _value in list(globals().items()):
    if _value is not _unittest.TestCase and (_name.startswith(("test", "Test")) or (isinstance(_value, type) and issubclass(_value, _unittest.TestCase))):
        try:
            _value.__test__ = False
        except (AttributeError, TypeError):
            pass
`, suite)
	if m == c.File {
		fmt.Fprintf(&b, `

class %s(_unittest.TestCase):
    __test__ = True

    def %s(self):
        self.assertEqual("%s", "%s")

    def %s(self):
        self.assertEqual("%s", "%s_")
`, c.Class, c.Pass, c.value, c.value, c.Fail, c.value, c.value)
	}
	return b.String()
}

// placedScript is the shell text of a placed canary: append to every
// selected module, then run the harness's command between the markers.
func (c Canary) placedScript() string {
	var b strings.Builder
	delim := "MSB_CANARY_" + c.Token
	for _, m := range c.modules {
		fmt.Fprintf(&b, "cat >> %s <<'%s'\n%s%s\n", quote(m), delim, c.placedSource(m), delim)
	}
	fmt.Fprintf(&b, "echo '%s'\n%s\necho '%s'\n", c.Start(), c.Command, c.End())
	return b.String()
}
