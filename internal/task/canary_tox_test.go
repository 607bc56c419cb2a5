package task

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/privtest"
)

// toxRow is a SWE-bench row tested as Sphinx's are: tox with
// tox-current-env (the pins of Sphinx's spec), whose tox.ini runs pytest
// with the arguments after -- and sets PYTEST_ADDOPTS over the caller's,
// as Sphinx 3.3's does (the structured channel must not ride it).
func toxRow(t *testing.T) dataset.Instance {
	t.Helper()
	return pyRow(t, "toxcalc", map[string]string{
		"tox.ini": "[tox]\nenvlist = py311\nskipsdist = True\n\n[testenv]\npassenv =\n    PYTEST_ADDOPTS\n" +
			"setenv =\n    PYTEST_ADDOPTS = --color no\ncommands =\n    pytest -rA -p no:cacheprovider --durations 25 {posargs}\n",
		"calc/__init__.py":  "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
		"tests/__init__.py": "",
		"tests/test_mul.py": "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
	}, map[string]string{
		"tests/test_add.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
		"tests/test_mul.py": "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n\n\ndef test_mul_zero():\n    assert mul(0, 3) == 0\n",
	}, []string{"tests/test_add.py::test_add"}, []string{"tests/test_mul.py::test_mul", "tests/test_mul.py::test_mul_zero"})
}

// toxTask is in's task: Sphinx's test command (for Python 3.11, the
// host's) and tox pins, pytest's parser; its environment is built with
// the package index (langEnv).
func toxTask(t *testing.T, in dataset.Instance) *Task {
	t.Helper()
	return overrideTask(t, in, "version: 1\nrepos:\n  "+in.Repo+":\n    \"*\":\n      python: \"3.11\"\n"+
		"      pip_packages: [tox==4.16.0, tox-current-env==0.0.11, pytest==8.3.3]\n      install: \"\"\n"+
		"      test_cmd: tox --current-env -epy311 -v --\n      log_parser: pytest\n      directives: paths\n")
}

// rewriteFromCode: the code under test, imported while pytest collects,
// makes every test report that pytest makes from then on passed (no
// conftest, no plugin file: no static rule reads it).
const rewriteFromCode = "\n\nimport _pytest.reports as _reports\n\n_make = _reports.TestReport.from_item_and_call.__func__\n\n\n" +
	"def _passed(cls, item, call):\n    rep = _make(cls, item, call)\n    rep.outcome = 'passed'\n    return rep\n\n\n" +
	"_reports.TestReport.from_item_and_call = classmethod(_passed)\n"

// TestToxCanary evaluates toxRow for real, with the canary forked (the
// default): the gold patch is resolved and ok, the canary placed in the
// harness's selection and the structured channel read through tox; the
// code under test rewriting pytest's reports is flagged by the canary, and
// fake PASSED lines printed at exit in the instance's run by the channel,
// each resolved by the harness alone, under --integrity fail and warn.
func TestToxCanary(t *testing.T) {
	if _, err := envcache.FindPython(context.Background(), "3.11", nil, envcache.PythonSearch{}); err != nil {
		privtest.Skip(t, "no python3.11 on the host: %v", err)
	}
	env := langEnv(t)
	in := toxRow(t)
	eval := func(model, p string, integ api.IntegrityMode) Evaluation {
		o := opts()
		o.TestTimeout = 10 * time.Minute
		o.Integrity, o.Canary, o.Fork = integ, api.CanaryForked, testFork(env)
		return Evaluate(context.Background(), env, toxTask(t, in), api.Prediction{InstanceID: in.InstanceID, Model: model, ModelPatch: &p}, o)
	}
	gold := eval("gold", in.Patch, api.IntegrityFail)
	r, log := gold.Result, gold.Artifacts.TestOutput
	if r.Outcome != api.OutcomeResolved || r.Reward != 1 || r.Report.Integrity != api.IntegrityOK || len(r.Report.IntegrityNotes) != 0 ||
		!strings.Contains(log, "msb canary end") {
		t.Fatalf("gold: %s reward %v integrity %q %q %q\n%s\n%s", r.Outcome, r.Reward, r.Report.Integrity, r.Report.IntegrityReasons,
			r.Report.IntegrityNotes, log, gold.Artifacts.RunLog)
	}
	for _, want := range []string{"structured channel: true", "in the harness's selection: true", "Sandbox forked after the eval steps"} {
		if !strings.Contains(gold.Artifacts.RunLog, want) {
			t.Errorf("gold: run log lacks %q:\n%s", want, gold.Artifacts.RunLog)
		}
	}
	for _, x := range []struct {
		name  string
		files map[string]string
		want  exploitReason
	}{
		{"pytest's reports rewritten by the code under test", map[string]string{"calc/__init__.py": rewriteFromCode}, byCanary},
		{"fake PASSED lines at exit, only in the instance's run", map[string]string{"calc/__init__.py": fakePassedAtExit("tests/test_add.py",
			append(append([]string{}, in.FailToPass...), in.PassToPass...))}, byChannel},
	} {
		p := langExploit(t, in, x.files)
		for _, integ := range []api.IntegrityMode{api.IntegrityFail, api.IntegrityWarn} {
			ev := eval("x", p, integ)
			checkExploit(t, ev, integ, []exploitReason{x.want})
			if integ == api.IntegrityWarn && ev.Result.Outcome != api.OutcomeResolved {
				t.Errorf("%s: the harness alone does not resolve it: %s\n%s", x.name, ev.Result.Outcome, ev.Artifacts.TestOutput)
			}
		}
	}
}
