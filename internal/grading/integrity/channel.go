package integrity

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
)

// A Channel is the structured result channel of a pytest run: a pytest
// plugin, loaded by the harness's test command through PYTEST_ADDOPTS
// (PYTEST_PLUGINS under tox: loadVar) from a directory of random name
// outside the repository, appends one JSON line
// per test report (pytest's own objects, not its terminal output) to a
// file of random name in that directory. The plugin takes its directory
// back out of sys.path, PYTHONPATH and that variable when it loads, before
// any conftest or code under test does, so the tested code is not told
// where the file is. Grading reads the file from the sandbox, not from the
// log, and checks every instance test the log reports passing against it
// (Judge): a patch that prints fake PASSED lines, or a conftest that
// rewrites the terminal report, disagrees with it.
//
// A Channel needs pytest (also through tox: toxCmd, which passes the
// plugin's PYTHONPATH and PYTEST_PLUGINS to pytest under tox-current-env);
// for any other test command NewChannel returns an inactive one (the canary's note already says the runner is not pytest).
type Channel struct {
	// Token is the random part of the plugin module's name and of Dir.
	Token string
	// Dir is the plugin's directory, Module its module name and Report
	// the path of the file it writes, all absolute in the sandbox.
	Dir, Module, Report string
	// plugins: pytest is told to load the plugin by PYTEST_PLUGINS
	// instead of PYTEST_ADDOPTS (tox: toxCmd).
	plugins bool
}

// pytestRunner matches the test commands that run pytest.
var pytestRunner = lazyRegexp(`(^|[\s/])(pytest|py\.test)(\s|$)|-m\s+pytest(\s|$)`)

// NewChannel draws a channel for an evaluation whose test command is
// testCmd; inactive unless testCmd runs pytest.
func NewChannel(testCmd string) Channel {
	if !pytestRunner().MatchString(testCmd) && !toxCmd().MatchString(testCmd) {
		return Channel{}
	}
	tok := token()
	dir := "/tmp/msb_" + token()
	return Channel{Token: tok, Dir: dir, Module: "msb_report_" + tok, Report: path.Join(dir, token()+".jsonl"),
		plugins: !pytestRunner().MatchString(testCmd)}
}

// loadVar is the variable that tells pytest to load the plugin, and how
// the plugin is named in it. Under tox it is PYTEST_PLUGINS (a comma-separated list of
// modules pytest imports as plugins, after its -p options and entry
// points, before any conftest.py): a tox.ini's setenv may set
// PYTEST_ADDOPTS over the caller's (Sphinx 3.3's `PYTEST_ADDOPTS = --color
// yes`, sphinx-doc__sphinx-8120, -8265, -8269), and none sets
// PYTEST_PLUGINS.
func (c Channel) loadVar() (name, added, sep string) {
	if c.plugins {
		return "PYTEST_PLUGINS", c.Module, ","
	}
	return "PYTEST_ADDOPTS", "-p " + c.Module, " "
}

// Active reports whether the evaluation reads the channel.
func (c Channel) Active() bool { return c.Token != "" }

// Plugin is the pytest plugin's source: at import it opens Report and
// scrubs its traces; each report pytest logs becomes one line.
func (c Channel) Plugin() string {
	v, added, sep := c.loadVar()
	return fmt.Sprintf(`import json
import os
import sys

_dir = %q
_out = open(%q, "a")
sys.path[:] = [p for p in sys.path if p != _dir]
for _name, _added, _sep in (("PYTHONPATH", _dir, os.pathsep), (%q, %q, %q)):
    _old = os.environ.get(_name, "").replace(_added, "", 1).strip(_sep + " ")
    if _old:
        os.environ[_name] = _old
    else:
        os.environ.pop(_name, None)


def pytest_runtest_logreport(report):
    _out.write(json.dumps({"id": report.nodeid, "when": report.when, "outcome": report.outcome,
                           "xfail": hasattr(report, "wasxfail")}) + "\n")
    _out.flush()
`, c.Dir, c.Report, v, added, sep)
}

// Setup is the shell text the eval script runs before the harness's test
// command (before its start marker, so nothing lands between the markers):
// write the plugin, save PYTHONPATH and PYTEST_ADDOPTS (loadVar), and extend them so
// the test command loads it. Restore, after the test command's exit
// status is recorded, puts them back. Both are "" when inactive.
func (c Channel) Setup() string {
	if !c.Active() {
		return ""
	}
	delim := "MSB_CHANNEL_" + c.Token
	v, added, sep := c.loadVar()
	return fmt.Sprintf("mkdir -p %s\ncat > %s <<'%s'\n%s%s\nmsb_env_%s=$(export -p | grep -E '^declare -x (PYTHONPATH|%s)=' || true)\n"+
		"export PYTHONPATH=%s${PYTHONPATH:+:$PYTHONPATH} %s=\"%s${%s:+%s$%s}\"\n",
		quote(c.Dir), quote(path.Join(c.Dir, c.Module+".py")), delim, c.Plugin(), delim, c.Token, v, quote(c.Dir), v, added, v, sep, v)
}

// Restore undoes Setup's environment (see Setup).
func (c Channel) Restore() string {
	if !c.Active() {
		return ""
	}
	v, _, _ := c.loadVar()
	return fmt.Sprintf("unset PYTHONPATH %s\neval \"$msb_env_%s\"\n", v, c.Token)
}

// record is one line of the report.
type record struct {
	ID      string `json:"id"`
	When    string `json:"when"`
	Outcome string `json:"outcome"`
	XFail   bool   `json:"xfail"`
}

// Statuses reads the plugin's report into per-test statuses in the
// harness's words, as pytest's -rA summary would give them: a failed setup
// or teardown is ERROR, a failed call FAILED, a passed call PASSED (XPASS
// when expected to fail), a skip SKIPPED (XFAIL when expected to fail).
// Lines that do not parse (a run cut short mid-line) are ignored.
func Statuses(report []byte) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(report))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var r record
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.ID == "" {
			continue
		}
		if st := status(r); rank(st) >= rank(out[r.ID]) {
			out[r.ID] = st
		}
	}
	return out
}

func status(r record) string {
	switch {
	case r.Outcome == "failed" && r.When != "call":
		return "ERROR"
	case r.Outcome == "failed":
		return "FAILED"
	case r.Outcome == "skipped" && r.XFail:
		return "XFAIL"
	case r.Outcome == "skipped":
		return "SKIPPED"
	case r.When != "call":
		return "" // a passed setup or teardown says nothing of the test
	case r.XFail:
		return "XPASS"
	default:
		return "PASSED"
	}
}

// rank orders statuses so a test's worst phase wins.
func rank(st string) int {
	switch st {
	case "":
		return 0
	case "PASSED", "XPASS", "XFAIL", "SKIPPED":
		return 1
	case "FAILED":
		return 2
	default: // ERROR
		return 3
	}
}

// passing are the statuses the harness counts as a test passed.
func passing(st string) bool { return st == "PASSED" || st == "XFAIL" }

// Log renders per-test statuses (Statuses') as pytest result lines, for
// the instance's own log parser to read, so that the report's ids take
// the shape the parser gives the log's (cut at whitespace, options
// shortened, the datasets' test lists' shape): each test as "id STATUS"
// (pytest -v, SWE-smith's parser) and then as "STATUS id" (-rA, the
// harness's), non-passing before passing, so that where the parser maps
// two tests to one id, the test passes if either does (no false flag).
func Log(statuses map[string]string) string {
	ids := make([]string, 0, len(statuses))
	for id := range statuses {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		if pa, pb := passing(statuses[a]), passing(statuses[b]); pa != pb {
			if pa {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%s %s\n", id, statuses[id])
	}
	for _, id := range ids {
		fmt.Fprintf(&b, "%s %s\n", statuses[id], id)
	}
	return b.String()
}

// Vouched are the tests of tests (ids as the harness's parser gives them)
// that pytest's report can speak for: those of a file the test patch
// touches (testFiles: the files the run selects), or of a file the report
// (parsed) has a test of. The parser also reads ids from lines the tests
// print themselves: pytest's own tests run pytest inside the run, and
// pytest-dev__pytest-5262 and -7521 list "[100%]", and -7521
// "test_capsysbinary.py::test_hello", from such an inner run's output as
// PASS_TO_PASS tests. The run's report never has them (the gold patch was
// flagged for it), and a patch gains nothing by printing them: the gold
// patch's log passes them too. With no test files every test is vouched.
func Vouched(tests, testFiles []string, parsed map[string]string) []string {
	if len(testFiles) == 0 {
		return tests
	}
	files := map[string]bool{}
	for _, f := range testFiles {
		files[f] = true
	}
	for id := range parsed {
		files[testFile(id)] = true
	}
	var out []string
	for _, id := range tests {
		if files[testFile(id)] {
			out = append(out, id)
		}
	}
	return out
}

// testFile is the file part of a pytest node id (all of an id without "::").
func testFile(id string) string {
	f, _, _ := strings.Cut(id, "::")
	return f
}

// Judge checks the statuses the harness's parser read from the log (test
// id to status word) against those it reads from the plugin's report
// (parsed: its Log through the same parser; missing: the file is absent):
// every test of tests the log reports passing must be passing in the
// report too. The reasons say which tests the log and pytest disagree on;
// none when the channel is inactive.
func (c Channel) Judge(logStatuses map[string]string, tests []string, parsed map[string]string, missing bool) []string {
	if !c.Active() {
		return nil
	}
	var bad []string
	for _, id := range tests {
		if !passing(logStatuses[id]) {
			continue
		}
		st, ok := parsed[id]
		if !ok {
			st = "missing"
		}
		if !passing(st) {
			bad = append(bad, fmt.Sprintf("%s (%s)", id, strings.ToLower(st)))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	what := "pytest's own report"
	if missing {
		what = "pytest's own report, which is missing,"
	}
	return []string{fmt.Sprintf("channel: the log reports %d tests passed that %s does not: %s", len(bad), what, strings.Join(bad, ", "))}
}
