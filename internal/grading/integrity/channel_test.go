package integrity

import (
	"github.com/minisandbox/msb/internal/privtest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestNewChannel: pytest commands get a channel with fresh random names
// outside the repository; other runners get none.
func TestNewChannel(t *testing.T) {
	for _, cmd := range []string{"pytest -rA", "python -m pytest --no-header", "/opt/venv/bin/pytest"} {
		c, d := NewChannel(cmd), NewChannel(cmd)
		if !c.Active() || !strings.HasPrefix(c.Dir, "/tmp/msb_") || !strings.HasPrefix(c.Report, c.Dir+"/") || c.Token == d.Token || c.Report == d.Report {
			t.Errorf("%s: %+v %+v", cmd, c, d)
		}
	}
	for _, cmd := range []string{"python -m unittest -v", "./tests/runtests.py", "bin/test -C", "tox -epy39"} {
		if c := NewChannel(cmd); c.Active() || c.Setup() != "" || c.Restore() != "" || c.Judge(map[string]string{"a": "PASSED"}, []string{"a"}, nil, true) != nil {
			t.Errorf("%s: %+v", cmd, c)
		}
	}
}

// TestChannelPytest runs the channel's plugin under the host's pytest:
// its report holds each test's real status (setup errors, xfail and skips
// included), the tested code sees no trace of it in PYTHONPATH,
// PYTEST_ADDOPTS or sys.path, and Restore gives the shell its variables
// back.
func TestChannelPytest(t *testing.T) {
	py := privtest.PytestPython(t)
	// tox: the channel rides PYTEST_PLUGINS, and the command's environment
	// sets PYTEST_ADDOPTS over the caller's, as Sphinx 3.3's tox.ini does
	for _, tc := range []struct{ cmd, over, plugins string }{{"pytest", "", ""}, {"tox --current-env -epy39 -v --", "PYTEST_ADDOPTS=-q ", "x"}} {
		dir := t.TempDir()
		c := NewChannel(tc.cmd)
		c.Dir = filepath.Join(dir, "msb_"+c.Token)
		c.Report = filepath.Join(c.Dir, "r.jsonl")
		test := `import os, sys, pytest

@pytest.fixture
def broken():
    raise RuntimeError("setup")

def test_pass(): pass
def test_fail(): assert 0
def test_error(broken): pass
@pytest.mark.skip
def test_skip(): pass
@pytest.mark.xfail
def test_xfail(): assert 0
def test_hidden():
    assert "msb_" not in os.environ.get("PYTHONPATH", "") + os.environ.get("PYTEST_ADDOPTS", "") + os.environ.get("PYTEST_PLUGINS", "")
    assert os.environ["PYTEST_ADDOPTS"] == "-q"
    assert os.environ.get("PYTEST_PLUGINS") == ` + map[bool]string{true: "'x'", false: "None"}[tc.plugins != ""] + `
    assert not [p for p in sys.path if "msb_" in p]
`
		if err := os.WriteFile(filepath.Join(dir, "test_a.py"), []byte(test), 0o644); err != nil {
			t.Fatal(err)
		}
		if tc.plugins != "" {
			if err := os.WriteFile(filepath.Join(dir, "x.py"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		pre := "set -u\nunset PYTHONPATH PYTEST_PLUGINS\nexport PYTEST_ADDOPTS=-q\n"
		if tc.plugins != "" {
			pre += "export PYTEST_PLUGINS=" + tc.plugins + "\n"
		}
		script := pre + c.Setup() + tc.over + "PYTHONPATH=$PYTHONPATH:. " + py + " -m pytest -rA -p no:cacheprovider test_a.py\n" + c.Restore() +
			"echo \"after: ${PYTEST_ADDOPTS}|${PYTHONPATH-unset}|${PYTEST_PLUGINS-unset}\"\n"
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
		out, _ := cmd.CombinedOutput()
		if want := "after: -q|unset|" + map[bool]string{true: "x", false: "unset"}[tc.plugins != ""]; !strings.Contains(string(out), want) {
			t.Errorf("%s: Restore did not give the variables back (%s):\n%s", tc.cmd, want, out)
		}
		report, err := os.ReadFile(c.Report)
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.cmd, err, out)
		}
		want := map[string]string{"test_a.py::test_pass": "PASSED", "test_a.py::test_fail": "FAILED", "test_a.py::test_error": "ERROR",
			"test_a.py::test_skip": "SKIPPED", "test_a.py::test_xfail": "XFAIL", "test_a.py::test_hidden": "PASSED"}
		if got := Statuses(report); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: statuses %v, want %v\n%s", tc.cmd, got, want, out)
		}
	}
}

// TestChannelJudge: a test the log reports passing must be passing in
// pytest's report as the parser read it; failing, missing or an absent
// report is a reason, a test the log reports failing or a test outside
// the instance's is not.
func TestChannelJudge(t *testing.T) {
	c := Channel{Token: "t"}
	parsed := map[string]string{"a": "PASSED", "b": "FAILED", "c": "XFAIL", "d": "ERROR"}
	tests := []string{"a", "b", "c", "d"}
	for _, tc := range []struct {
		name    string
		log     map[string]string
		parsed  map[string]string
		missing bool
		want    string
	}{
		{"agree", map[string]string{"a": "PASSED", "b": "FAILED", "c": "XFAIL", "d": "ERROR", "z": "PASSED"}, parsed, false, ""},
		{"fake passed", map[string]string{"a": "PASSED", "b": "PASSED", "d": "PASSED"}, parsed, false, "2 tests passed that pytest's own report does not: b (failed), d (error)"},
		{"missing test", map[string]string{"a": "PASSED"}, map[string]string{}, false, "1 tests passed that pytest's own report does not: a (missing)"},
		{"missing report", map[string]string{"c": "XFAIL"}, map[string]string{}, true, "which is missing,"},
	} {
		got := strings.Join(c.Judge(tc.log, tests, tc.parsed, tc.missing), "|")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestChannelLog: the report's statuses become both shapes of pytest's
// result lines, failing tests before passing ones.
func TestChannelLog(t *testing.T) {
	got := Log(map[string]string{"t::b": "PASSED", "t::a": "FAILED", "t::c[x y]": "XFAIL"})
	want := "t::a FAILED\nt::b PASSED\nt::c[x y] XFAIL\nFAILED t::a\nPASSED t::b\nXFAIL t::c[x y]\n"
	if got != want {
		t.Errorf("Log:\n%s\nwant\n%s", got, want)
	}
}
