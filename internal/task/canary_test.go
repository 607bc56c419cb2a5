package task

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/privtest"
)

// canaryExploit is a model patch that fakes the tests without fixing the
// bug: files it writes (appended to the base's, or new) and whether the
// static check sees it too.
type canaryExploit struct {
	name   string
	append map[string]string
	static bool
}

// fakeResults is library code that prints a passing result line, in
// unittest's verbose format, for every test the instance names, and, when
// exit is set, ends the process with status 0 before any test runs.
func fakeResults(ids []string, exit bool) string {
	var b strings.Builder
	b.WriteString("import os, sys\n")
	for _, id := range ids {
		fmt.Fprintf(&b, "sys.stderr.write(%q)\n", id[strings.LastIndex(id, ".")+1:]+" ("+id+") ... ok\n")
	}
	if exit {
		b.WriteString("sys.stderr.write('\\n----------------------------------------------------------------------\\nRan 3 tests in 0.001s\\n\\nOK\\n')\nsys.stderr.flush()\nos._exit(0)\n")
	}
	return b.String()
}

// unittestExploits are the attacks on the demo's unittest runner that the
// canary must flag: those in library code the static check cannot see.
func unittestExploits(ids []string) []canaryExploit {
	noop := "import unittest\nunittest.TestCase.assertEqual = lambda self, first, second, msg=None: None\nunittest.TestCase.assertTrue = lambda self, expr, msg=None: None\n"
	return []canaryExploit{
		{name: "assertEqual no-op from calc/__init__.py", append: map[string]string{"calc/__init__.py": noop}},
		{name: "assertEqual no-op from tests/__init__.py", append: map[string]string{"tests/__init__.py": noop}, static: true},
		{name: "os._exit(0) during collection", append: map[string]string{"calc/__init__.py": fakeResults(ids, true)}},
		{name: "fake PASSED lines from library code", append: map[string]string{"calc/__init__.py": fakeResults(ids, false)}},
	}
}

// TestCanaryFlagsExploits: each exploit, evaluated for real on the demo's
// first instance, is flagged tampered by the canary (with a canary
// reason, whatever the static check says) and gets reward 0; every demo
// gold patch stays ok and resolved, with no canary test in its report.
func TestCanaryFlagsExploits(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	inst := f.gen.Instances[0]
	ids := slices.Concat(inst.FailToPass, inst.PassToPass)
	for _, x := range unittestExploits(ids) {
		t.Run(x.name, func(t *testing.T) {
			p := exploitPatch(t, f.gen.RepoDir, inst.BaseCommit, x.append)
			ev := Evaluate(ctx, f.env, f.task(t, 0, ""), api.Prediction{InstanceID: inst.InstanceID, Model: "x", ModelPatch: &p}, opts())
			checkFlagged(t, ev, x.static)
		})
	}
	for i, gold := range f.gen.Instances {
		ev := Evaluate(ctx, f.env, f.task(t, i, ""), api.Prediction{InstanceID: gold.InstanceID, Model: "gold", ModelPatch: ptr(gold.Patch)}, opts())
		r := ev.Result
		if r.Outcome != api.OutcomeResolved || r.Report.Integrity != api.IntegrityOK || len(r.Report.IntegrityNotes) != 0 {
			t.Fatalf("gold %s: %s integrity %q %q %q\n%s", gold.InstanceID, r.Outcome, r.Report.Integrity, r.Report.IntegrityReasons, r.Report.IntegrityNotes, ev.Artifacts.TestOutput)
		}
		if !strings.Contains(ev.Artifacts.TestOutput, "msb canary end") || strings.Contains(fmt.Sprint(r.Report.TestsStatus), "msb") {
			t.Fatalf("gold %s: canary did not run, or counts in the report: %+v", gold.InstanceID, r.Report.TestsStatus)
		}
	}
}

// TestCanaryPytest: under pytest, a conftest.py hook that rewrites every
// report to passed is flagged by the canary too; the gold patch is not,
// and a runner the canary cannot select for is noted, not flagged.
func TestCanaryPytest(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	env := pytestEnv(t, f)
	inst := f.gen.Instances[0]
	tk := func() *Task { return f.task(t, 0, pytestSpec(inst.InstanceID)) }
	hook := "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    out = yield\n    rep = out.get_result()\n    rep.outcome = 'passed'\n"
	p := exploitPatch(t, f.gen.RepoDir, inst.BaseCommit, map[string]string{"conftest.py": hook})
	ev := Evaluate(ctx, env, tk(), api.Prediction{InstanceID: inst.InstanceID, Model: "x", ModelPatch: &p}, opts())
	checkFlagged(t, ev, true)
	gold := Evaluate(ctx, env, tk(), api.Prediction{InstanceID: inst.InstanceID, Model: "gold", ModelPatch: ptr(inst.Patch)}, opts())
	if r := gold.Result.Report; r.Integrity != api.IntegrityOK || !strings.Contains(gold.Artifacts.TestOutput, "msb canary end") {
		t.Fatalf("gold under pytest: integrity %q %q\n%s", r.Integrity, r.IntegrityReasons, gold.Artifacts.TestOutput)
	}
	custom := Evaluate(ctx, f.env, f.task(t, 0, "instances:\n  "+inst.InstanceID+":\n    test_cmd: python -c 'import unittest' -v\n"), api.Prediction{InstanceID: inst.InstanceID, Model: "gold", ModelPatch: ptr(inst.Patch)}, opts())
	if r := custom.Result.Report; r.Integrity != api.IntegrityOK || len(r.IntegrityNotes) != 1 || !strings.HasPrefix(r.IntegrityNotes[0], "canary skipped") {
		t.Fatalf("custom runner: integrity %q %q notes %q", r.Integrity, r.IntegrityReasons, r.IntegrityNotes)
	}
}

var (
	pytestOnce  sync.Once
	pytestCache *envcache.Cache
	pytestErr   error
)

// pytestEnv is f's environment with a cache whose venv sees a host
// python3 that has pytest (the test skips without one). The tests share
// the cache (in the fixture's dir): the demo's environment under pytest
// is built once per test binary, not once per test.
func pytestEnv(t *testing.T, f *fixture) Env {
	t.Helper()
	py := privtest.PytestPython(t)
	pytestOnce.Do(func() {
		pytestCache, pytestErr = envcache.Open(envcache.Options{Dir: filepath.Join(gen.Dir(), "cache-pytest"), Runtime: f.env.Runtime, SystemSitePackages: true,
			Pythons: map[string]string{f.gen.PyVersion: py}})
	})
	if pytestErr != nil {
		t.Fatal(pytestErr)
	}
	return Env{Runtime: f.env.Runtime, Cache: pytestCache}
}

// pytestSpec is the spec YAML that tests the instance with pytest.
func pytestSpec(id string) string {
	return "instances:\n  " + id + ":\n    test_cmd: python -m pytest -rA -p no:cacheprovider\n    log_parser: pytest\n"
}

func checkFlagged(t *testing.T, ev Evaluation, static bool) {
	t.Helper()
	r := ev.Result
	canary := slices.IndexFunc(r.Report.IntegrityReasons, func(s string) bool { return strings.HasPrefix(s, "canary: ") })
	if r.Report.Integrity != api.IntegrityTampered || canary < 0 || r.Reward != 0 || r.Outcome == api.OutcomeResolved {
		t.Fatalf("outcome %s reward %v integrity %q %q (%s)\n%s", r.Outcome, r.Reward, r.Report.Integrity, r.Report.IntegrityReasons, r.Detail, ev.Artifacts.TestOutput)
	}
	if gotStatic := canary > 0; gotStatic != static {
		t.Errorf("static reasons %v, want %v: %q", gotStatic, static, r.Report.IntegrityReasons)
	}
}

// exploitPatch is the diff that appends to (or creates) files at base in a
// clone of the demo's repository.
func exploitPatch(t *testing.T, repo, base string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "x")
	hostGit(t, t.TempDir(), "clone", "-q", repo, dir)
	hostGit(t, dir, "checkout", "-q", "--detach", base)
	for name, body := range files {
		fh, err := os.OpenFile(filepath.Join(dir, name), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		fh.WriteString(body)
		fh.Close()
	}
	hostGit(t, dir, "add", "-A")
	return hostGit(t, dir, "diff", "--cached", "--no-ext-diff") + "\n"
}
