package task

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
	"github.com/minisandbox/msb/internal/spec"
)

// extFiles is a package whose install writes into the tree, as setuptools
// projects do: setup.py writes ext/_version.py (imported without a
// fallback, like setuptools-scm's write_to) and builds the C extension
// ext/_fast in place (an editable install's build_ext --inplace).
var extFiles = map[string]string{
	"setup.py": `from setuptools import setup, Extension
with open("ext/_version.py", "w") as f:
    f.write("version = '1.0.0'\n")
setup(name="ext", version="1.0.0", packages=["ext"],
      ext_modules=[Extension("ext._fast", ["ext/_fast.c"])])
`,
	"ext/__init__.py": "from ._version import version\nfrom ._fast import add\n",
	"ext/_fast.c": `#include <Python.h>
static PyObject *add(PyObject *self, PyObject *args) {
    long a, b;
    if (!PyArg_ParseTuple(args, "ll", &a, &b)) return NULL;
    return PyLong_FromLong(a - b);
}
static PyMethodDef methods[] = {{"add", add, METH_VARARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1, methods};
PyMODINIT_FUNC PyInit__fast(void) { return PyModule_Create(&mod); }
`,
	".gitignore":        "ext/_version.py\n*.so\nbuild/\n*.egg-info/\n",
	"tests/__init__.py": "",
	"tests/test_ext.py": `import unittest
import ext

class ExtTest(unittest.TestCase):
    def test_version(self):
        self.assertEqual(ext.version, "1.0.0")
`,
}

func gitIn(t *testing.T, dir string, args ...string) string {
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

// extInstance makes the repository in dir, its bug (add subtracts, in C),
// and the gold and test patches.
func extInstance(t *testing.T, dir string) dataset.Instance {
	t.Helper()
	for name, body := range extFiles {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitIn(t, dir, "init", "-q", "-b", "main")
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-qm", "ext")
	base := strings.TrimSpace(gitIn(t, dir, "rev-parse", "HEAD"))
	edit := func(name, from, to string) string {
		p := filepath.Join(dir, name)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(b), from, to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		d := gitIn(t, dir, "diff")
		gitIn(t, dir, "checkout", "-q", "--", ".")
		return d
	}
	gold := edit("ext/_fast.c", "a - b", "a + b")
	testPatch := edit("tests/test_ext.py", `"1.0.0")`, "\"1.0.0\")\n\n    def test_add(self):\n        self.assertEqual(ext.add(2, 3), 5)")
	return dataset.Instance{
		InstanceID: "demo__ext-1", Repo: "demo/ext", BaseCommit: base, Version: "1.0", RepoURL: dir,
		Patch: gold, TestPatch: testPatch,
		FailToPass: []string{"tests.test_ext.ExtTest.test_add"}, PassToPass: []string{"tests.test_ext.ExtTest.test_version"},
	}
}

// TestEvaluateInstallLayer evaluates, end to end, an instance whose install
// step writes a version file and compiles a module in place, into the
// instance's install layer (built in a build sandbox of its own, root and
// rootless): the gold patch, to the C source, resolves because eval_install
// builds it again before the tests; the empty patch does not.
func TestEvaluateInstallLayer(t *testing.T) {
	inst, env, tk := extTask(t, "python -m pip install --no-build-isolation --no-index -e .")
	cache := env.Cache
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		model string
		patch string
		want  api.Outcome
	}{{"gold", inst.Patch, api.OutcomeResolved}, {"empty", "", api.OutcomeUnresolved}} {
		o := EvalOptions{GradeEmpty: true, TestTimeout: 2 * time.Minute}
		ev := Evaluate(ctx, env, tk, api.Prediction{InstanceID: inst.InstanceID, Model: tc.model, ModelPatch: &tc.patch}, o)
		if ev.Result.Outcome != tc.want {
			t.Errorf("%s patch: %s %s\n%s\n%s", tc.model, ev.Result.Outcome, ev.Result.Detail, ev.Artifacts.RunLog, ev.Artifacts.TestOutput)
		}
	}
	if s := cache.Stats(); s.InstallBuilds != 1 {
		t.Errorf("install layers built: %d, want 1 (both evaluations share it)", s.InstallBuilds)
	}
}

// extTask makes extInstance's repository, a cache and runtime in a
// directory of the test, and the task whose spec installs with install.
func extTask(t *testing.T, install string) (dataset.Instance, Env, *Task) {
	t.Helper()
	ver := newFixture(t).gen.PyVersion // the host's python3
	if _, err := os.Stat(fmt.Sprintf("/usr/include/python%s/Python.h", ver)); err != nil {
		t.Fatalf("the test builds a C extension: install gcc and python3-dev (%v)", err)
	}
	dir, err := os.MkdirTemp(os.Getenv(privtest.StateBaseEnv), "msb-task-install-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sandbox.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	inst := extInstance(t, filepath.Join(dir, "ext"))
	ov, err := spec.ParseOverrides(fmt.Appendf(nil, `version: 1
repos:
  demo/ext:
    "*":
      python: "%s"
      install: %s
      eval_install: true
      test_cmd: python -m unittest -v
      log_parser: unittest
      directives: none
`, ver, install))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := New(inst, ov)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := sandbox.NewRuntime(sandbox.RuntimeOptions{StateDir: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	// The venv sees Debian's setuptools: builds have no network here.
	cache, err := envcache.Open(envcache.Options{Dir: filepath.Join(dir, "cache"), Runtime: rt, SystemSitePackages: true})
	if err != nil {
		t.Fatal(err)
	}
	return inst, Env{Runtime: rt, Cache: cache}, tk
}

// TestInstallOutputsNotInDiff: what an install step leaves untracked and
// unignored in /testbed (a build dir, a binary with glob characters in its
// name) is not in the agent's patch of an untouched task; a file the agent
// adds is, even one whose name those outputs' patterns would match.
func TestInstallOutputsNotInDiff(t *testing.T) {
	_, env, tk := extTask(t, `"python -m pip install --no-build-isolation --no-index -e . && mkdir -p out/obj && echo 1 > out/obj/a.o && echo 2 > 'gen*[1].bin'"`)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sb, err := Open(ctx, env, tk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if d, err := sb.Diff(ctx); err != nil || d != "" {
		t.Fatalf("an untouched task's diff: %v\n%s", err, d)
	}
	res, err := sb.Exec(ctx, session.ExecRequest{Command: "echo new > 'genX[1].bin' && echo 3 > out/obj/a.o"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("agent's edit: %v %+v", err, res)
	}
	d, err := sb.Diff(ctx)
	if err != nil || !strings.Contains(d, "genX[1].bin") || strings.Contains(d, "a.o") || strings.Contains(d, "gen*") {
		t.Fatalf("the agent's diff: %v\n%s", err, d)
	}
}
