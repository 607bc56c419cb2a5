package integrity

import (
	"fmt"
	"path"
	"strings"
)

// SymPy's own runner (bin/test, which calls sympy.test from
// sympy/testing/runtests.py, sympy/utilities/runtests.py before 1.6)
// takes the test files it is given, executes each one's source into a
// dictionary of its own (compile and exec, not import) and runs the
// module-level functions named test_* that the file defines, in the order
// of their lines; with --verbose it prints one line per test, "test_x ok",
// "test_x F" or "test_x E" (a file's last test followed by "[OK]" or
// "[FAIL]" on the same line, which the harness's parse_log_sympy does not
// read), and a banner per failure, which it reads as failed
// (grading.ParseSympy). The canary's failing function comes last, so the
// banner reports it, and its passing one before it. It runs them in a child
// python with hash randomization, so the runner, the code under test
// (bin/test imports sympy whole) and the tests share one process.
//
// The SymPy canary is the Python canary for that runner: two functions,
// test_<words> each, one asserting that a drawn word equals itself and
// one that it equals itself and a suffix. Where every directive is a test
// module (test_*.py) it runs in the harness's selection, with the
// harness's command line character for character (placeSympy): every
// selected file gets code appended that deletes its test_* names and
// defines the canary's two functions, so each file's imports, and the
// code under test, run as in the harness's run, and each file that runs
// reports the canary. Otherwise the two functions are a file of their own
// beside the test patch's first test module, run as the test command with
// that file as its only argument.
//
// No structured channel: the runner is part of the repository under test
// (sympy/testing/runtests.py is sympy's code, which a patch changes like
// any other), runs the tests in its own process and has no plugin or
// report interface; any report it wrote would be written by code the
// patch controls. The canary is what checks it.

// runnerSympy is a Python canary's runner for SymPy's bin/test.
const runnerSympy = "sympy"

// sympyCmd matches a test command that runs SymPy's bin/test.
var sympyCmd = lazyRegexp(`(^|[\s;&|(/])bin/test(\s|$)`)

// sympySource is the canary's two functions.
func (c Canary) sympySource() string {
	return fmt.Sprintf(`

def %s():
    assert "%s" == "%s"


def %s():
    assert "%s" == "%s_"
`, c.Pass, c.value, c.value, c.Fail, c.value, c.value)
}

// sympyTakeOut is what a placed SymPy canary appends to a selected file
// before its two functions: the file's own tests deleted, so that the
// runner finds none of them.
const sympyTakeOut = `

for _name in [_n for _n in globals() if _n.startswith("test_")]:
    del globals()[_name]
`

// placeSympy places a SymPy canary in the harness's run: every directive
// must be a test module (test_*.py, which the runner executes), and each
// gets the canary (a file that runs reports it; one the runner skips,
// disabled or failing at its imports as in the harness's run, does not:
// StrictSympy reads every report). Otherwise c is returned as it was, to
// run in a file of its own.
func (c Canary) placeSympy(command string, directives []string) Canary {
	var mods []string
	for _, d := range directives {
		if !strings.HasSuffix(d, ".py") || !testModule(d) || strings.HasPrefix(d, "/") || strings.Contains(d, "..") {
			return c
		}
		mods = append(mods, d)
	}
	if len(mods) == 0 {
		return c
	}
	c.modules, c.File, c.Dir, c.Command = mods, mods[0], path.Dir(mods[0]), command
	return c
}

// sympyScript is the shell text of a SymPy canary: placed, append to
// every selected file and run the harness's command; else write the
// canary's file, run it, remove it.
func (c Canary) sympyScript() string {
	var b strings.Builder
	delim := "MSB_CANARY_" + c.Token
	if c.Placed() {
		for _, m := range c.modules {
			fmt.Fprintf(&b, "cat >> %s <<'%s'\n%s%s%s\n", quote(m), delim, sympyTakeOut, c.sympySource(), delim)
		}
		fmt.Fprintf(&b, "echo '%s'\n%s\necho '%s'\n", c.Start(), c.Command, c.End())
		return b.String()
	}
	fmt.Fprintf(&b, "cat > %s <<'%s'\n%s%s\necho '%s'\n%s\necho '%s'\nrm -f %s\n",
		quote(c.File), delim, c.Source(), delim, c.Start(), c.Command, c.End(), quote(c.File))
	return b.String()
}

// Statuses is what the canary's run shows, out its output: its runner's
// own report where it keeps one (Report; own is true), else parsed, the
// instance's parser's reading of out, held to every report line of a
// runner that reports a name more than once (StrictSympy).
func (c Canary) Statuses(out string, parsed map[string]string) (statuses map[string]string, own bool) {
	if statuses, own = c.Report(out); own {
		return statuses, true
	}
	return c.StrictSympy(out, parsed), false
}

// StrictSympy returns statuses (the instance's parser's reading of the
// canary run's output out) with each canary test given its worst report
// in out: a placed SymPy canary runs once per selected file, and the
// parser keeps one status per name, the last. A passing canary reported
// anything but ok in any file is reported so; a failing one reported ok
// in any file is PASSED. statuses is returned as it was for any other
// canary.
func (c Canary) StrictSympy(out string, statuses map[string]string) map[string]string {
	if !c.Active() || c.runner != runnerSympy {
		return statuses
	}
	var passBad string
	var failOK bool
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line) // "test_x ok", or "test_x F [FAIL]" for a file's last test
		if len(f) < 2 {
			continue
		}
		switch {
		case f[0] == c.Pass && f[1] != "ok" && passBad == "":
			passBad = sympyWord(f[1])
		case f[0] == c.Fail && f[1] == "ok":
			failOK = true
		}
	}
	if passBad == "" && !failOK {
		return statuses
	}
	m := make(map[string]string, len(statuses)+2)
	for id, st := range statuses {
		m[id] = st
	}
	for id := range m {
		if passBad != "" && names(id, c.Pass) {
			m[id] = passBad
		}
		if failOK && names(id, c.Fail) {
			m[id] = "PASSED"
		}
	}
	if passBad != "" {
		m[c.Pass] = passBad
	}
	if failOK {
		m[c.Fail] = "PASSED"
	}
	return m
}

// sympyWord is the status of a verbose report's word.
func sympyWord(w string) string {
	switch w {
	case "F":
		return "FAILED"
	case "E":
		return "ERROR"
	}
	return "SKIPPED"
}
