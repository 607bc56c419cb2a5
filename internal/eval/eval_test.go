package eval

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/patch"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/sandbox/sbinit"
	"github.com/minisandbox/msb/internal/spec"
)

func TestMain(m *testing.M) {
	if sbinit.IsChild() {
		sbinit.Main()
	}
	code := m.Run()
	if code == 0 {
		if err := privtest.CheckLeaks(""); err != nil {
			fmt.Fprintln(os.Stderr, "leak check:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// fixture is a generated project, its instances and a cache, shared by the
// tests of this file.
type fixture struct {
	gen  *demo.Generated
	opts Options
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	gen, err := demo.Generate(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := sandbox.NewRuntime(sandbox.RuntimeOptions{StateDir: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := envcache.Open(envcache.Options{Dir: filepath.Join(dir, "cache"), Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{gen: gen, opts: Options{Cache: cache, Runtime: rt, TestTimeout: time.Minute}}
}

func (f *fixture) overrides(t *testing.T, extra string) *spec.Overrides {
	t.Helper()
	ov, err := spec.ParseOverrides([]byte(demo.SpecYAML(f.gen.PyVersion) + extra))
	if err != nil {
		t.Fatal(err)
	}
	return ov
}

func ptr(s string) *string { return &s }

// TestEveryOutcome evaluates one instance of the generated project in every
// way an evaluation can end, each in a fresh sandbox.
func TestEveryOutcome(t *testing.T) {
	f := newFixture(t)
	inst := f.gen.Instances[0]
	base := f.overrides(t, "")
	for _, tc := range []struct {
		name       string
		patch      *string
		gradeEmpty bool
		ov         *spec.Overrides
		timeout    time.Duration
		want       grading.Outcome
		detail     string
	}{
		{"gold resolves", ptr(inst.Patch), false, base, 0, grading.OutcomeResolved, ""},
		{"empty graded is unresolved", ptr(""), true, base, 0, grading.OutcomeUnresolved, ""},
		{"wrong fix is unresolved", ptr(strings.Replace(inst.Patch, "+    return (s[mid - 1] + s[mid]) / 2", "+    return s[mid - 1]", 1)), false, base, 0, grading.OutcomeUnresolved, ""},
		{"empty patch", ptr("  \n"), false, base, 0, grading.OutcomeEmptyPatch, ""},
		{"missing patch", nil, false, base, 0, grading.OutcomeEmptyPatch, ""},
		{"patch does not apply", ptr("diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-a\n+b\n"), false, base, 0, grading.OutcomePatchApplyFailed, "did not apply"},
		{"tests time out", ptr(inst.Patch), false, f.overrides(t, "instances:\n  "+inst.InstanceID+":\n    eval_commands: [\"sleep 60\"]\n"), 2 * time.Second, grading.OutcomeTestTimeout, ""},
		{"environment does not build", ptr(inst.Patch), false, f.overrides(t, "instances:\n  "+inst.InstanceID+":\n    install: \"echo broken build >&2; exit 3\"\n"), 0, grading.OutcomeEnvBuildFailed, ""},
		{"unknown log parser is an infrastructure error", ptr(inst.Patch), false, f.overrides(t, "instances:\n  "+inst.InstanceID+":\n    log_parser: nosuchparser\n"), 0, grading.OutcomeInfraError, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := f.opts
			o.Overrides, o.GradeEmpty = tc.ov, tc.gradeEmpty
			if tc.timeout > 0 {
				o.TestTimeout = tc.timeout
			}
			res := Evaluate(context.Background(), o, inst, Prediction{InstanceID: inst.InstanceID, Model: "m", Patch: tc.patch})
			if res.Outcome != tc.want || !strings.Contains(res.Detail, tc.detail) {
				t.Fatalf("outcome %s (%s), want %s; log:\n%s", res.Outcome, res.Detail, tc.want, res.Log)
			}
			if (res.Reward == 1) != (tc.want == grading.OutcomeResolved) {
				t.Fatalf("reward %v for %s", res.Reward, res.Outcome)
			}
			if tc.want == grading.OutcomeUnresolved {
				o.Reward = grading.RewardFraction
				frac := Evaluate(context.Background(), o, inst, Prediction{InstanceID: inst.InstanceID, Model: "m", Patch: tc.patch})
				// The P2P tests pass, the F2P test does not: a fraction strictly between 0 and 1.
				if frac.Reward <= 0 || frac.Reward >= 1 {
					t.Fatalf("fraction reward %v for %s", frac.Reward, frac.Outcome)
				}
			}
			if tc.want == grading.OutcomeResolved && res.ApplyMethod != ApplyCommands[0] {
				t.Fatalf("applied with %q", res.ApplyMethod)
			}
		})
	}
}

// TestToleratedPatch needs the harness's fallback: a patch whose context is
// off by a few lines applies with `patch --fuzz`, not with git apply.
func TestToleratedPatch(t *testing.T) {
	f := newFixture(t)
	inst := f.gen.Instances[0]
	fuzzy := strings.Replace(inst.Patch, "     mid = len(s) // 2\n", "     mid = len(s) // 2  # the middle\n", 1)
	o := f.opts
	o.Overrides = f.overrides(t, "")
	res := Evaluate(context.Background(), o, inst, Prediction{InstanceID: inst.InstanceID, Patch: &fuzzy})
	if res.Outcome != grading.OutcomeResolved || res.ApplyMethod == ApplyCommands[0] {
		t.Fatalf("outcome %s applied with %q: %s", res.Outcome, res.ApplyMethod, res.Detail)
	}
}

// TestRunnerResumes runs a whole set, then runs it again: nothing is
// evaluated twice, and the harness's files are there.
func TestRunnerResumes(t *testing.T) {
	f := newFixture(t)
	o := f.opts
	o.Overrides = f.overrides(t, "")
	out := t.TempDir()
	preds := map[string]Prediction{}
	for _, in := range f.gen.Instances {
		p := in.Patch
		preds[in.InstanceID] = Prediction{InstanceID: in.InstanceID, Model: "gold", Patch: &p}
	}
	delete(preds, f.gen.Instances[3].InstanceID) // one instance without a prediction
	r, err := NewRunner(RunOptions{Options: o, RunID: "r1", OutDir: out, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	sum, _, err := r.Run(context.Background(), f.gen.Instances, preds, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.TotalInstances != 4 || sum.SubmittedInstances != 3 || sum.ResolvedInstances != 3 || sum.CompletedInstances != 3 {
		t.Fatalf("summary %+v", sum)
	}
	for _, name := range []string{"report.json", "test_output.txt", "patch.diff", "result.json"} {
		if _, err := os.Stat(filepath.Join(out, "r1", "gold", f.gen.Instances[0].InstanceID, name)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(r.SummaryPath("gold")); err != nil {
		t.Fatal(err)
	}
	resumed := 0
	_, _, err = r.Run(context.Background(), f.gen.Instances, preds, func(done, total int, res Result, wasResumed bool) {
		if wasResumed {
			resumed++
		}
	})
	if err != nil || resumed != 3 {
		t.Fatalf("second run: %v, %d of 3 resumed", err, resumed)
	}
}

func TestLoadPredictionsFormats(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"list.json":  `[{"instance_id": "a", "model_name_or_path": "m", "model_patch": "diff"}]`,
		"dict.json":  `{"a": {"model_name_or_path": "m", "model_patch": "diff"}}`,
		"rows.jsonl": "{\"instance_id\": \"a\", \"model_name_or_path\": \"m\", \"model_patch\": \"diff\"}\n",
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		got, err := LoadPredictions(p)
		if err != nil || got["a"].Model != "m" || *got["a"].Patch != "diff" {
			t.Errorf("%s: %+v %v", name, got, err)
		}
	}
	p := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(p, []byte("{\"model_patch\": \"x\"}\n"), 0o644)
	if _, err := LoadPredictions(p); err == nil || !strings.Contains(err.Error(), "instance_id") {
		t.Fatalf("missing id: %v", err)
	}
}

func TestEvalScriptResetsTestFiles(t *testing.T) {
	inst := dataset.Instance{InstanceID: "x", BaseCommit: "abc123", TestPatch: "diff --git a/tests/t.py b/tests/t.py\n--- a/tests/t.py\n+++ b/tests/t.py\n@@ -1 +1 @@\n-a\n+b\n"}
	s := EvalScript(inst, spec.Spec{TestCmd: "pytest", Directives: spec.DirectivesPaths})
	if strings.Count(s, "git checkout -q HEAD -- tests/t.py") != 2 || !strings.Contains(s, "pytest tests/t.py") {
		t.Fatalf("script:\n%s", s)
	}
}

// TestSWESmithSemantics grades a SWE-smith-style instance: the repository
// is at a clean commit (tests included), the dataset's patch introduces the
// bug, and the fix is that patch reversed.
func TestSWESmithSemantics(t *testing.T) {
	f := newFixture(t)
	src := f.gen.Instances[0]
	repo := f.gen.RepoDir
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	// The clean commit: the correct code with the tests that catch the bug.
	git("checkout", "-q", "--detach", src.EnvironmentSetupCommit)
	apply := exec.Command("git", "apply", "-")
	apply.Dir, apply.Stdin = repo, strings.NewReader(src.TestPatch)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	git("commit", "-qam", "tests")
	clean := git("rev-parse", "HEAD")
	bug := patch.Reverse(src.Patch)
	inst := dataset.Instance{InstanceID: "demo.calc__smith-1", Repo: src.Repo, RepoURL: repo, BaseCommit: clean,
		Patch: bug, Version: src.Version, ImageName: "demo.calc", Source: dataset.SWESmith,
		FailToPass: src.FailToPass, PassToPass: src.PassToPass}
	o := f.opts
	o.Overrides = f.overrides(t, "")
	fix := patch.Reverse(inst.Patch)
	if res := Evaluate(context.Background(), o, inst, Prediction{InstanceID: inst.InstanceID, Patch: &fix}); res.Outcome != grading.OutcomeResolved {
		t.Fatalf("the reversed bug patch: %s %s\n%s", res.Outcome, res.Detail, res.Log)
	}
	o.GradeEmpty = true
	if res := Evaluate(context.Background(), o, inst, Prediction{InstanceID: inst.InstanceID, Patch: ptr("")}); res.Outcome != grading.OutcomeUnresolved {
		t.Fatalf("empty patch on the bug: %s %s\n%s", res.Outcome, res.Detail, res.Log)
	}
}
