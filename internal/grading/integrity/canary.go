package integrity

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path"
	"strings"
)

// A Canary is the dynamic check of the test machinery: two tests the
// evaluation adds under names drawn at random for it, one that must fail
// and one that must pass, run by the instance's own test command in a
// sandbox of its own (internal/task), after the harness's script has set
// it up as for its run, so the harness's run (whose log and exit status
// stay the harness's) never sees the canary and the canary's run looks
// like it. A Python canary runs, where it can, in the harness's own
// selection and command line (Place, canary_place.go); otherwise its file
// sits in the directory of the instance's first test file, so the same
// package __init__.py and conftest.py files load, and it imports that test
// file's module, so the code under test loads too. A patch that makes assertions no-ops, rewrites reports, ends the
// process during collection or prints results of its own shows in the
// canary run: the failing test passes, a test is missing, or tests are
// reported that did not run (only the two canaries are selected).
//
// Its file, class and tests are named with ordinary words (DrawNames),
// like a repository's own tests; Token, random too, only marks the
// canary run's output in the log and is never in a name or a file.
//
// A canary needs a runner whose selection takes a file: pytest and
// Python's unittest (also pytest through tox: toxCmd), SymPy's bin/test
// (canary_sympy.go), go test, cargo test, Maven, Gradle, Jest, Mocha,
// Vitest, CTest and Automake's make check (canary_lang.go). For any other
// test command (Django's runtests.py, Karma) NewCanary returns one with a
// Note and no Script.
type Canary struct {
	// Token marks the canary run's output (Start, End); Dir is the
	// canary file's directory and File its path, relative to the
	// repository root.
	Token, Dir, File string
	// Class, Pass and Fail name the TestCase and its two tests.
	Class, Pass, Fail string
	// Command runs the two tests: the test command and File.
	Command string
	// Import is the dotted module of the test file the canary imports
	// (or, when that fails, its last part, as pytest's rootdir insertion
	// would import it).
	Import string
	// Note says why the evaluation runs no canary; "" when it does.
	Note string
	// lang is "" for the Python canary, else the language of one that
	// finds its place at run time among the candidates (canary_lang.go).
	lang       string
	candidates []string
	// value is what the Python canary's tests compare.
	value string
	// testCmd is the instance's test command, from which the JavaScript
	// canary's helper takes its runner's options (canary_javascript.go).
	testCmd string
	// modules are the test modules of the harness's selection a placed
	// canary takes the tests out of; File is its host (canary_place.go).
	modules []string
	// runner is "" for pytest and unittest, runnerSympy for SymPy's
	// bin/test (canary_sympy.go).
	runner string
}

// canaryRunner matches the test commands whose selection can take the
// canary file: pytest (also as python -m pytest) and python -m unittest.
var canaryRunner = lazyRegexp(`(^|[\s/])(pytest|py\.test)(\s|$)|-m\s+(pytest|unittest)(\s|$)`)

// toxCmd matches a tox command that passes arguments to its test
// environment's commands (after --, tox's {posargs}). The canary and the
// structured channel take it for pytest: tox's commands at the pins of
// the one dataset that tests through tox (Sphinx's tox.ini: `pytest
// --durations 25 {posargs}`, from 3.4 `python -X dev -m pytest ...`) run
// pytest with those arguments, and tox-current-env (--current-env) passes
// every environment variable through (tox 4 alone passes a fixed list,
// and Sphinx's passenv names PYTEST_ADDOPTS but not PYTHONPATH).
var toxCmd = lazyRegexp(`(^|[\s;&|(/])tox\s(.*\s)?--(\s|$)`)

// NewCanary draws a canary for an evaluation whose test command is
// testCmd and whose test patch touches testFiles.
func NewCanary(testCmd string, testFiles []string) Canary {
	runner := ""
	switch {
	case sympyCmd().MatchString(testCmd):
		runner = runnerSympy
	case canaryRunner().MatchString(testCmd), toxCmd().MatchString(testCmd):
	default:
		if c, ok := langCanary(testCmd, testFiles); ok {
			return c
		}
		return Canary{Note: "canary skipped: the test command runs none of pytest, unittest, tox, SymPy's bin/test, go test, cargo test, Maven, Gradle, Jest, Mocha, Vitest, ctest or make check, whose selection the canary needs"}
	}
	var first string
	for _, f := range testFiles {
		if strings.HasSuffix(f, ".py") && !strings.HasPrefix(f, "/") && !strings.Contains(f, "..") {
			first = f
			break
		}
	}
	if runner != "" || toxCmd().MatchString(testCmd) {
		// SymPy's runner runs only test_*.py files, and Sphinx's test
		// patches name the files of its test roots (tests/roots/...)
		// before a test module: beside the first test module
		for _, f := range testFiles {
			if strings.HasSuffix(f, ".py") && testModule(f) && !strings.HasPrefix(f, "/") && !strings.Contains(f, "..") {
				first = f
				break
			}
		}
	}
	if first == "" {
		return Canary{Note: "canary skipped: the test patch touches no Python test file"}
	}
	names, tests := DrawNames(3, 2), DrawNames(2, 3)
	c := Canary{
		Token: token(), Dir: path.Dir(first),
		Class: "Test" + names[0].Camel(), Pass: "test_" + tests[0].Snake(), Fail: "test_" + tests[1].Snake(),
		Import: strings.ReplaceAll(strings.TrimSuffix(first, ".py"), "/", "."),
		value:  names[2].Snake(), runner: runner,
	}
	c.File = path.Join(c.Dir, "test_"+names[1].Snake()+".py")
	c.Command = testCmd + " " + quote(c.File)
	return c
}

func token() string {
	b := make([]byte, 8)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// Active reports whether the evaluation runs the canary.
func (c Canary) Active() bool { return c.Note == "" && c.Token != "" }

// Source is the canary test file. The failing test compares two different
// values with assertEqual, the assertion a patch would disable; nothing
// in it names msb or the token.
func (c Canary) Source() string {
	if c.runner == runnerSympy {
		return strings.TrimLeft(c.sympySource(), "\n")
	}
	return fmt.Sprintf(`import importlib
import unittest

for name in (%q, %q):
    try:
        importlib.import_module(name)
        break
    except BaseException:
        pass


class %s(unittest.TestCase):
    def %s(self):
        self.assertEqual("%s", "%s")

    def %s(self):
        self.assertEqual("%s", "%s_")
`, c.Import, c.Import[strings.LastIndex(c.Import, ".")+1:], c.Class, c.Pass, c.value, c.value, c.Fail, c.value, c.value)
}

// Start and End mark the canary run's output in the evaluation log.
func (c Canary) Start() string { return ">>>>> msb canary start " + c.Token }
func (c Canary) End() string   { return ">>>>> msb canary end " + c.Token }

// Script is the shell text that runs the canary where the harness's test
// command would run (in the repository, after the harness's script has
// set up the environment and applied the test patch): write the canary
// file, run it between the markers, remove it. "" when the canary is
// skipped.
func (c Canary) Script() string {
	if !c.Active() {
		return ""
	}
	if c.lang != "" {
		return c.langScript()
	}
	if c.runner == runnerSympy {
		return c.sympyScript()
	}
	if c.Placed() {
		return c.placedScript()
	}
	delim := "MSB_CANARY_" + c.Token
	return fmt.Sprintf("cat > %s <<'%s'\n%s%s\necho '%s'\n%s\necho '%s'\nrm -f %s\n",
		quote(c.File), delim, c.Source(), delim, c.Start(), c.Command, c.End(), quote(c.File))
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Output is the canary run's part of log, between the markers; false when
// the markers are missing.
func (c Canary) Output(log string) (string, bool) {
	_, rest, ok := strings.Cut(log, c.Start()+"\n")
	if !ok {
		return "", false
	}
	out, _, ok := strings.Cut(rest, c.End())
	return out, ok
}

// Is reports whether the test id a parser gave names one of the canaries.
func (c Canary) Is(id string) bool { return c.Active() && (names(id, c.Pass) || names(id, c.Fail)) }

// names reports whether id holds the test name n ("" is no name).
func names(id, n string) bool { return n != "" && strings.Contains(id, n) }

// Judge says what the canary run's statuses, as a parser gave them (test
// id to the harness's status word: PASSED, FAILED, ERROR ...) or as
// Report read them (Ignored too), show:
// reasons the test machinery was tampered with, none when it reported the
// failing test failed, the passing one passed, and nothing else.
func (c Canary) Judge(statuses map[string]string, markers bool) []string {
	if !c.Active() {
		return nil
	}
	if !markers {
		return []string{"canary: the canary run's output is missing (the evaluation ended early)"}
	}
	var pass, fail string
	var others []string
	for id, st := range statuses {
		switch {
		case names(id, c.Pass):
			pass = st
		case names(id, c.Fail):
			fail = st
		case c.packageEntry(id):
		case c.Placed() && (st == "FAILED" || st == "ERROR" || st == "SKIPPED"):
			// a selected module that fails or is skipped whole, in the
			// harness's run too: no pass a patch could fake
		default:
			others = append(others, id)
		}
	}
	var reasons []string
	switch fail {
	case "FAILED", "ERROR":
	case Ignored:
		reasons = append(reasons, "canary: the build succeeds with a failing test (its failure is ignored)")
	case "":
		if c.lang == canaryCTest {
			// fmt's parser never reads ctest's failure lines (they end
			// in a time): a failing test is one it does not report
			break
		}
		reasons = append(reasons, "canary: the test machinery did not report a failing test")
	default:
		reasons = append(reasons, "canary: the test machinery reports a failing test as "+strings.ToLower(fail))
	}
	if pass != "PASSED" {
		reasons = append(reasons, "canary: the test machinery did not report a passing test as passed")
	}
	if len(others) > 0 {
		reasons = append(reasons, fmt.Sprintf("canary: the log reports %d tests that did not run (%s)", len(others), others[0]))
	}
	return reasons
}
