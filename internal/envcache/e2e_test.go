package envcache_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/eval"
	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/spec"
)

// calcFiles is a package whose install writes into the tree, as setuptools
// projects do: setup.py writes calc/_version.py (imported without a
// fallback, like setuptools-scm's write_to) and builds the C extension
// calc/_fast in place (an editable install's build_ext --inplace).
var calcFiles = map[string]string{
	"setup.py": `from setuptools import setup, Extension
with open("calc/_version.py", "w") as f:
    f.write("version = '1.0.0'\n")
setup(name="calc", version="1.0.0", packages=["calc"],
      ext_modules=[Extension("calc._fast", ["calc/_fast.c"])])
`,
	"calc/__init__.py": "from ._version import version\nfrom ._fast import add\n",
	"calc/_fast.c": `#include <Python.h>
static PyObject *add(PyObject *self, PyObject *args) {
    long a, b;
    if (!PyArg_ParseTuple(args, "ll", &a, &b)) return NULL;
    return PyLong_FromLong(a - b);
}
static PyMethodDef methods[] = {{"add", add, METH_VARARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1, methods};
PyMODINIT_FUNC PyInit__fast(void) { return PyModule_Create(&mod); }
`,
	"tests/__init__.py": "",
	"tests/test_calc.py": `import unittest
import calc

class CalcTest(unittest.TestCase):
    def test_version(self):
        self.assertEqual(calc.version, "1.0.0")
`,
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// calcInstance makes the repository, its bug (add subtracts, in C) and the
// gold and test patches.
func calcInstance(t *testing.T) dataset.Instance {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "calc")
	for name, body := range calcFiles {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("calc/_version.py\n*.so\nbuild/\n*.egg-info/\n"), 0o644)
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "calc")
	base := strings.TrimSpace(git(t, dir, "rev-parse", "HEAD"))
	c := filepath.Join(dir, "calc/_fast.c")
	b, _ := os.ReadFile(c)
	os.WriteFile(c, []byte(strings.Replace(string(b), "a - b", "a + b", 1)), 0o644)
	gold := git(t, dir, "diff")
	git(t, dir, "checkout", "-q", "--", ".")
	tf := filepath.Join(dir, "tests/test_calc.py")
	b, _ = os.ReadFile(tf)
	os.WriteFile(tf, append(b, []byte("\n    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n")...), 0o644)
	testPatch := git(t, dir, "diff")
	git(t, dir, "checkout", "-q", "--", ".")
	return dataset.Instance{
		InstanceID: "demo__calc-1", Repo: "demo/calc", BaseCommit: base, Version: "1.0", RepoURL: dir,
		Patch: gold, TestPatch: testPatch,
		FailToPass: []string{"tests.test_calc.CalcTest.test_add"}, PassToPass: []string{"tests.test_calc.CalcTest.test_version"},
	}
}

// TestEvaluateInstallWritesTree evaluates, end to end, an instance whose
// install step writes a version file and compiles a module in place: the
// gold patch (to the C source, so the eval-time install rebuilds it)
// resolves, the empty patch does not. Without the install layer the
// package does not import and the gold patch fails.
func TestEvaluateInstallWritesTree(t *testing.T) {
	if _, err := os.Stat("/usr/include/python3.11/Python.h"); err != nil {
		t.Fatalf("the test builds a C extension: install gcc and python3-dev (%v)", err)
	}
	inst := calcInstance(t)
	ov, err := spec.ParseOverrides([]byte(`version: 1
repos:
  demo/calc:
    "*":
      python: "3.11"
      install: python -m pip install --no-build-isolation -e .
      eval_install: true
      test_cmd: python -m unittest -v
      log_parser: unittest
      directives: none
`))
	if err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	rt, err := sandbox.NewRuntime(sandbox.RuntimeOptions{StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	c, err := envcache.Open(envcache.Options{Dir: filepath.Join(t.TempDir(), "cache"), Runtime: rt, SystemSitePackages: true,
		Pythons: map[string]string{"3.11": "/usr/bin/python3.11"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	o := eval.Options{Cache: c, Runtime: rt, Overrides: ov, GradeEmpty: true, TestTimeout: 2 * time.Minute}
	for _, tc := range []struct {
		name  string
		patch string
		want  grading.Outcome
	}{{"gold", inst.Patch, grading.OutcomeResolved}, {"empty", "", grading.OutcomeUnresolved}} {
		p := tc.patch
		res := eval.Evaluate(ctx, o, inst, eval.Prediction{InstanceID: inst.InstanceID, Model: tc.name, Patch: &p})
		if res.Outcome != tc.want {
			t.Errorf("%s patch: %s %s\n%s", tc.name, res.Outcome, res.Detail, res.Log)
		}
	}
}
