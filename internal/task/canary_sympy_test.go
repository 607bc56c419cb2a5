package task

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
)

// sympyRunnerDir holds a small stand-in for SymPy's runner, shared with
// internal/grading/integrity's tests: bin/test and the runner module it
// calls, which prints what SymPy's prints with --verbose.
const sympyRunnerDir = "../grading/integrity/testdata/sympy"

// sympyRow is a SWE-bench row of a SymPy-like repository, tested by its
// own bin/test and read by the harness's sympy parser: calc's add
// subtracts until the fix; the test patch adds calc/tests/test_add.py
// (test_add fails until the fix) and a test to calc/tests/test_mul.py,
// whose test_mul passes throughout. A file's last test is never read
// passed (its line ends in [OK], as SymPy's does), so each file ends in a
// test no list names.
func sympyRow(t *testing.T) dataset.Instance {
	t.Helper()
	runner := func(name string) string {
		b, err := os.ReadFile(filepath.Join(sympyRunnerDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return pyRow(t, "sympycalc", map[string]string{
		"bin/test":                 runner("test"),
		"calc/__init__.py":         "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
		"calc/testing/__init__.py": "",
		"calc/testing/runtests.py": runner("runtests.py"),
		"calc/tests/__init__.py":   "",
		"calc/tests/test_mul.py":   "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n\n\ndef test_mul_one():\n    assert mul(1, 1) == 1\n",
	}, map[string]string{
		"calc/tests/test_add.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_add_zero():\n    assert add(0, 0) == 0\n",
		"calc/tests/test_mul.py": "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n\n\ndef test_mul_zero():\n    assert mul(0, 3) == 0\n\n\ndef test_mul_one():\n    assert mul(1, 1) == 1\n",
	}, []string{"test_add"}, []string{"test_mul", "test_mul_zero"}, "bin/test")
}

// pyRow is a SWE-bench row of repository msbtest/name: base committed
// (the files of executable made executable), then tests (the test patch),
// then the fix (the gold patch: calc/__init__.py's add adds instead of
// subtracting).
func pyRow(t *testing.T, name string, base, tests map[string]string, f2p, p2p []string, executable ...string) dataset.Instance {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	git := rowGit(t, dir)
	writeFiles(t, dir, base)
	for _, x := range executable {
		if err := os.Chmod(filepath.Join(dir, x), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "base")
	baseCommit := strings.TrimSpace(git("rev-parse", "HEAD"))
	writeFiles(t, dir, tests)
	git("add", "-A")
	git("commit", "-q", "-m", "tests")
	testPatch := git("diff", baseCommit, "HEAD")
	writeFiles(t, dir, map[string]string{"calc/__init__.py": strings.Replace(base["calc/__init__.py"], "return a - b", "return a + b", 1)})
	git("commit", "-q", "-am", "fix")
	fix := git("diff", "HEAD~1", "HEAD")
	return dataset.Instance{InstanceID: "msbtest__" + name + "-1", Repo: "msbtest/" + name, BaseCommit: baseCommit, Patch: fix, TestPatch: testPatch,
		FailToPass: f2p, PassToPass: p2p, Source: dataset.SWEBench, RepoURL: dir}
}

// sympyTask is in's task: SymPy's test command and parser, the host's
// python (the demo's environment).
func sympyTask(t *testing.T, f *fixture, in dataset.Instance) *Task {
	t.Helper()
	return overrideTask(t, in, "version: 1\nrepos:\n  "+in.Repo+":\n    \"*\":\n      python: \""+f.gen.PyVersion+"\"\n"+
		"      pip_packages: []\n      install: \"\"\n"+
		"      test_cmd: PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose\n"+
		"      log_parser: sympy\n      directives: paths\n")
}

// TestSympyCanary evaluates sympyRow for real, in both canary modes that
// keep it secret (separate, forked): the gold patch is resolved and ok,
// its canary run in the harness's selection (both test files, the
// harness's command line). Two patches that change no test file and no
// runner file, only the code under test, are resolved by the harness and
// flagged by the canary alone, under --integrity fail (unresolved, reward
// 0) and warn: one makes the runner record failures as passes (as a patch
// to sympy/__init__.py could with sympy.testing.runtests.PyTestReporter),
// one makes builtins.compile, which the runner (SymPy's too) compiles each
// test file with, drop every assert.
func TestSympyCanary(t *testing.T) {
	f := newFixture(t)
	in := sympyRow(t)
	exploits := []struct {
		name  string
		files map[string]string
	}{
		{"the runner records failures as passes", map[string]string{"calc/__init__.py": "\n\nfrom calc.testing import runtests as _rt\n\n" +
			"_rt.Reporter.test_fail = lambda self, exc_info: _rt.Reporter.test_pass(self)\n"}},
		{"asserts compiled away: builtins.compile made to optimize", map[string]string{"calc/__init__.py": "\n\nimport builtins as _b\n\n" +
			"_compile = _b.compile\n_b.compile = lambda source, filename, mode, flags=0, dont_inherit=False, optimize=-1: " +
			"_compile(source, filename, mode, flags, dont_inherit, 1)\n"}},
	}
	for _, mode := range []api.CanaryMode{api.CanarySeparate, api.CanaryForked} {
		t.Run(string(mode), func(t *testing.T) {
			eval := func(model, p string, integ api.IntegrityMode) Evaluation {
				o := opts()
				o.Integrity, o.Canary = integ, mode
				if mode == api.CanaryForked {
					o.Fork = testFork(f.env)
				}
				return Evaluate(context.Background(), f.env, sympyTask(t, f, in), api.Prediction{InstanceID: in.InstanceID, Model: model, ModelPatch: &p}, o)
			}
			gold := eval("gold", in.Patch, api.IntegrityFail)
			r := gold.Result
			log := gold.Artifacts.TestOutput
			if r.Outcome != api.OutcomeResolved || r.Reward != 1 || r.Report.Integrity != api.IntegrityOK || len(r.Report.IntegrityNotes) != 0 ||
				!strings.Contains(log, "msb canary end") {
				t.Fatalf("gold: %s reward %v integrity %q %q %q\n%s\n%s", r.Outcome, r.Reward, r.Report.Integrity, r.Report.IntegrityReasons,
					r.Report.IntegrityNotes, log, gold.Artifacts.RunLog)
			}
			if !strings.Contains(gold.Artifacts.RunLog, "in the harness's selection: true") {
				t.Errorf("gold: canary not placed in the harness's selection:\n%s", gold.Artifacts.RunLog)
			}
			_, canary, _ := strings.Cut(log, "msb canary start")
			for _, harness := range []string{"test_add ", "test_mul "} {
				if strings.Contains(canary, harness) {
					t.Errorf("gold: the harness's test %q ran in the canary's run:\n%s", harness, canary)
				}
			}
			if n := strings.Count(canary, " ok\n"); n != 2 {
				t.Errorf("gold: the passing canary reported %d times, want once per file (2):\n%s", n, canary)
			}
			if mode == api.CanaryForked && !strings.Contains(gold.Artifacts.RunLog, "Sandbox forked after the eval steps") {
				t.Errorf("gold: not forked:\n%s", gold.Artifacts.RunLog)
			}
			for _, x := range exploits {
				p := langExploit(t, in, x.files)
				for _, integ := range []api.IntegrityMode{api.IntegrityFail, api.IntegrityWarn} {
					ev := eval("x", p, integ)
					checkExploit(t, ev, integ, []exploitReason{byCanary})
					if r := ev.Result; len(r.Report.IntegrityReasons) != 1 || integ == api.IntegrityWarn && r.Outcome != api.OutcomeResolved {
						t.Errorf("%s %s: %s reasons %q: want the harness's verdict resolved and the canary's reason alone", x.name, integ, r.Outcome, r.Report.IntegrityReasons)
					}
				}
			}
		})
	}
}
