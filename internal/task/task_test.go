package task

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/patch"
	"github.com/minisandbox/msb/internal/spec"
)

// TestEvaluateEveryOutcome evaluates one instance of the generated project
// in every way an evaluation can end, each in a fresh sandbox, and checks
// which of the harness's files the outcome leaves.
func TestEvaluateEveryOutcome(t *testing.T) {
	f := newFixture(t)
	inst := f.gen.Instances[0]
	wrong := strings.Replace(inst.Patch, "+    return (s[mid - 1] + s[mid]) / 2", "+    return s[mid - 1]", 1)
	noApply := "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-a\n+b\n"
	// A patch that makes the test command fail while every test passes: its
	// own PASSED lines cannot be trusted (the harness's exit code check).
	lying := inst.Patch + "diff --git a/tests/__init__.py b/tests/__init__.py\nindex e69de29..0000000 100644\n--- a/tests/__init__.py\n+++ b/tests/__init__.py\n@@ -0,0 +1,2 @@\n+import atexit, os\n+atexit.register(lambda: os._exit(3))\n"
	for _, tc := range []struct {
		name       string
		patch      *string
		gradeEmpty bool
		extra      string
		timeout    time.Duration
		want       api.Outcome
		detail     string
		files      [3]bool // patch.diff, eval.sh, test_output.txt
	}{
		{"gold resolves", ptr(inst.Patch), false, "", 0, api.OutcomeResolved, "", [3]bool{true, true, true}},
		{"empty graded is unresolved", ptr(""), true, "", 0, api.OutcomeUnresolved, "", [3]bool{false, true, true}},
		{"wrong fix is unresolved", ptr(wrong), false, "", 0, api.OutcomeUnresolved, "", [3]bool{true, true, true}},
		{"a failing exit code with only passes is unresolved", ptr(lying), false, "", 0, api.OutcomeUnresolved, "log reports no failing test", [3]bool{true, true, true}},
		{"empty patch is not run", ptr("  \n"), false, "", 0, api.OutcomeEmptyPatch, "", [3]bool{}},
		{"missing patch is not run", nil, false, "", 0, api.OutcomeEmptyPatch, "", [3]bool{}},
		{"patch does not apply", ptr(noApply), false, "", 0, api.OutcomePatchApplyFailed, "patch did not apply", [3]bool{true, false, false}},
		{"tests time out", ptr(inst.Patch), false, "instances:\n  " + inst.InstanceID + ":\n    eval_commands: [\"sleep 60\"]\n", 2 * time.Second, api.OutcomeTestTimeout, "", [3]bool{true, true, true}},
		{"environment does not build", ptr(inst.Patch), false, "instances:\n  " + inst.InstanceID + ":\n    install: \"echo broken build >&2; exit 3\"\n", 0, api.OutcomeEnvBuildFailed, "broken build", [3]bool{}},
		{"unknown python is an infrastructure error", ptr(inst.Patch), false, "instances:\n  " + inst.InstanceID + ":\n    python: \"2.1\"\n", 0, api.OutcomeInfraError, "2.1", [3]bool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk, err := New(inst, f.overrides(t, tc.extra))
			if err != nil {
				t.Fatal(err)
			}
			o := opts()
			o.GradeEmpty = tc.gradeEmpty
			if tc.timeout > 0 {
				o.TestTimeout = tc.timeout
			}
			ev := Evaluate(context.Background(), f.env, tk, api.Prediction{InstanceID: inst.InstanceID, Model: "m", ModelPatch: tc.patch}, o)
			res, art := ev.Result, ev.Artifacts
			if res.Outcome != tc.want || !strings.Contains(res.Detail, tc.detail) {
				t.Fatalf("outcome %s (%s), want %s; log:\n%s\n%s", res.Outcome, res.Detail, tc.want, art.RunLog, art.TestOutput)
			}
			if (res.Reward == 1) != (tc.want == api.OutcomeResolved) {
				t.Fatalf("reward %v for %s", res.Reward, res.Outcome)
			}
			if got := [3]bool{art.PatchWritten, art.ScriptWritten, art.TestsRan}; got != tc.files {
				t.Fatalf("patch.diff, eval.sh, test_output.txt written: %v, want %v", got, tc.files)
			}
			if art.Ran != (tc.want != api.OutcomeEmptyPatch) || art.Ran && !strings.Contains(art.RunLog, "Result for "+inst.InstanceID) {
				t.Fatalf("ran %v; run log:\n%s", art.Ran, art.RunLog)
			}
			if res.SpecDigest != tk.SpecDigest || res.PatchDigest != PatchDigest(tc.patch) {
				t.Fatalf("digests %s %s", res.SpecDigest, res.PatchDigest)
			}
			switch tc.want {
			case api.OutcomeResolved:
				if res.ApplyMethod != ApplyCommands[0] || res.TestExitCode == nil || *res.TestExitCode != 0 {
					t.Fatalf("applied with %q, test exit code %v", res.ApplyMethod, res.TestExitCode)
				}
			case api.OutcomeUnresolved:
				o.Reward = api.RewardFraction
				frac := Evaluate(context.Background(), f.env, tk, api.Prediction{InstanceID: inst.InstanceID, Model: "m", ModelPatch: tc.patch}, o)
				if res.Report.TestsStatus != nil && (frac.Result.Reward <= 0 || frac.Result.Reward >= 1) {
					// The P2P tests pass, the F2P test does not.
					t.Fatalf("fraction reward %v for %s", frac.Result.Reward, frac.Result.Outcome)
				}
			case api.OutcomeTestTimeout:
				if !strings.Contains(art.TestOutput, "Timeout error: 2 seconds exceeded.") {
					t.Fatalf("test output:\n%s", art.TestOutput)
				}
			}
		})
	}
}

// TestToleratedPatch needs the harness's fallback: a patch whose context is
// off by a few lines applies with a more tolerant command, not with the
// first.
func TestToleratedPatch(t *testing.T) {
	f := newFixture(t)
	tk := f.task(t, 0, "")
	fuzzy := strings.Replace(tk.Instance.Patch, "     mid = len(s) // 2\n", "     mid = len(s) // 2  # the middle\n", 1)
	ev := Evaluate(context.Background(), f.env, tk, api.Prediction{InstanceID: tk.ID(), Model: "m", ModelPatch: &fuzzy}, opts())
	if ev.Result.Outcome != api.OutcomeResolved || ev.Result.ApplyMethod == ApplyCommands[0] || ev.Result.ApplyMethod == "" {
		t.Fatalf("outcome %s applied with %q: %s\n%s", ev.Result.Outcome, ev.Result.ApplyMethod, ev.Result.Detail, ev.Artifacts.RunLog)
	}
}

// TestApplyAlreadyApplied: a patch whose change the tree already has is
// applied (the harness's reverse check), not a failure.
func TestApplyAlreadyApplied(t *testing.T) {
	f := newFixture(t)
	tk := f.task(t, 0, "")
	sb, err := Open(context.Background(), f.env, tk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if m, err := sb.ApplyPatch(context.Background(), tk.Instance.Patch, nil); err != nil || m != ApplyCommands[0] {
		t.Fatalf("first apply: %q %v", m, err)
	}
	// The fix committed, as if the starting state had it: every command
	// refuses the patch again (without blob ids --3way cannot merge).
	if res, err := sb.run(context.Background(), "git -c user.name=t -c user.email=t@t commit -qam fix", time.Minute); err != nil || res.ExitCode != 0 {
		t.Fatalf("commit: %v %s", err, res.Output)
	}
	var noIndex []string
	for _, l := range strings.SplitAfter(tk.Instance.Patch, "\n") {
		if !strings.HasPrefix(l, "index ") {
			noIndex = append(noIndex, l)
		}
	}
	if m, err := sb.ApplyPatch(context.Background(), strings.Join(noIndex, ""), nil); err != nil || m != AlreadyApplied {
		t.Fatalf("second apply: %q %v", m, err)
	}
}

// TestDiffIsTheAgentsPatch: what an agent does in its sandbox comes back as
// a patch against the starting state (untracked files included), and that
// patch resolves the instance when evaluated in a fresh sandbox.
func TestDiffIsTheAgentsPatch(t *testing.T) {
	f := newFixture(t)
	tk := f.task(t, 0, "")
	ctx := context.Background()
	sb := f.open(t, tk)
	if d, err := sb.Diff(ctx); err != nil || d != "" {
		t.Fatalf("diff at the start: %q %v", d, err)
	}
	// The agent fixes the bug with sed, adds a file and stages nothing.
	res, err := sb.run(ctx, `sed -i 's|^    return s\[mid\]$|    return (s[mid - 1] + s[mid]) / 2|' calc/stats.py && echo notes > NOTES.txt && git status --short`, time.Minute)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("agent: %v %+v", err, res)
	}
	d, err := sb.Diff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d, "+    return (s[mid - 1] + s[mid]) / 2") || !strings.Contains(d, "b/NOTES.txt") {
		t.Fatalf("diff:\n%s", d)
	}
	// The agent's own index is untouched.
	if res, _ := sb.run(ctx, "git diff --cached --quiet", time.Minute); res.ExitCode != 0 {
		t.Fatalf("Diff staged changes in the agent's index")
	}
	ev := Evaluate(ctx, f.env, tk, api.Prediction{InstanceID: tk.ID(), Model: "agent", ModelPatch: &d}, opts())
	if ev.Result.Outcome != api.OutcomeResolved {
		t.Fatalf("the agent's patch: %s %s\n%s", ev.Result.Outcome, ev.Result.Detail, ev.Artifacts.TestOutput)
	}
}

func TestEvalScript(t *testing.T) {
	inst := dataset.Instance{InstanceID: "x", BaseCommit: "abc123", TestPatch: "diff --git a/tests/t.py b/tests/t.py\n--- a/tests/t.py\n+++ b/tests/t.py\n@@ -1 +1 @@\n-a\n+EOF_114329324912\n"}
	tk := &Task{Instance: inst, Spec: spec.Spec{TestCmd: "pytest", Directives: spec.DirectivesPaths,
		Env: map[string]string{"B": "2", "A": "1 2", "C": "3"}}}
	s := EvalScript(tk)
	for _, want := range []string{"git checkout -q HEAD -- tests/t.py", "pytest tests/t.py\nSWEBENCH_TEST_EXIT_CODE=$?\n",
		"export A='1 2'\nexport B=2\nexport C=3\n", "<<'EOF_114329324912_'", grading.TestExitCode + ": $SWEBENCH_TEST_EXIT_CODE"} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
	if strings.Count(s, "git checkout -q HEAD -- tests/t.py") != 2 || !strings.HasPrefix(s, "#!/bin/bash\nset -uxo pipefail\n") {
		t.Fatalf("script:\n%s", s)
	}
	for range 20 { // the same script every time (no map order)
		if EvalScript(tk) != s {
			t.Fatal("the script changes between calls")
		}
	}
	// The eval steps: the eval commands, then (eval_install) the install
	// again, after the model patch and before the test files are reset.
	tk.Spec.EvalCommands, tk.Spec.Install = []string{"echo first"}, "pip install -e ."
	if s := EvalScript(tk); strings.Contains(s, "pip install") {
		t.Fatalf("the install runs again without eval_install:\n%s", s)
	}
	tk.Spec.EvalInstall = true
	s = EvalScript(tk)
	if !strings.Contains(s, "echo first\npip install -e .\ngit checkout -q HEAD -- tests/t.py") {
		t.Fatalf("eval steps not before the reset:\n%s", s)
	}
}

// TestSWESmithSemantics grades a SWE-smith-style instance: the repository
// is at a clean commit (tests included), the dataset's patch introduces the
// bug, the task sandbox starts with the bug committed, and the fix is that
// patch reversed.
func TestSWESmithSemantics(t *testing.T) {
	f := newFixture(t)
	src := f.gen.Instances[0]
	repo := t.TempDir()
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
	git("clone", "-q", f.gen.RepoDir, ".")
	// The clean commit: the correct code with the tests that catch the bug.
	git("checkout", "-q", "--detach", src.EnvironmentSetupCommit)
	apply := exec.Command("git", "apply", "-")
	apply.Dir, apply.Stdin = repo, strings.NewReader(src.TestPatch)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	git("commit", "-qam", "tests")
	clean := git("rev-parse", "HEAD")
	inst := dataset.Instance{InstanceID: "demo.calc__smith-1", Repo: src.Repo + "-smith", RepoURL: repo, BaseCommit: clean,
		Patch: patch.Reverse(src.Patch), Version: src.Version, ImageName: "demo.calc", Source: dataset.SWESmith,
		FailToPass: src.FailToPass, PassToPass: src.PassToPass}
	tk, err := New(inst, f.overrides(t, "  "+inst.Repo+":\n    \"*\":\n      python: \""+f.gen.PyVersion+"\"\n      pip_packages: []\n      install: \"\"\n      test_cmd: python -m unittest -v\n      log_parser: unittest\n      directives: none\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sb, err := Open(ctx, f.env, tk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.run(ctx, "git log -1 --format=%s && grep -c 'return s\\[mid\\]' calc/stats.py", time.Minute)
	sb.Close()
	if err != nil || !strings.Contains(res.Output, "SWE-smith bug") {
		t.Fatalf("starting state: %v %q", err, res.Output)
	}
	fix := inst.ReferenceFix()
	if ev := Evaluate(ctx, f.env, tk, api.Prediction{InstanceID: inst.InstanceID, Model: "m", ModelPatch: &fix}, opts()); ev.Result.Outcome != api.OutcomeResolved {
		t.Fatalf("the reversed bug patch: %s %s\n%s", ev.Result.Outcome, ev.Result.Detail, ev.Artifacts.TestOutput)
	}
	o := opts()
	o.GradeEmpty = true
	if ev := Evaluate(ctx, f.env, tk, api.Prediction{InstanceID: inst.InstanceID, Model: "m", ModelPatch: ptr("")}, o); ev.Result.Outcome != api.OutcomeUnresolved {
		t.Fatalf("empty patch on the bug: %s %s\n%s", ev.Result.Outcome, ev.Result.Detail, ev.Artifacts.TestOutput)
	}
}

// TestJudge is the admission rule: gold resolves, empty does not, and an
// evaluation without a verdict leaves the question open.
func TestJudge(t *testing.T) {
	r := func(o api.Outcome) api.EvalResult { return api.EvalResult{InstanceID: "i", Outcome: o, Detail: "why"} }
	flaky := r(api.OutcomeUnresolved)
	flaky.Flaky, flaky.Report.FlakyTests = true, api.List[string]{"t2", "t1"}
	if v := Judge(r(api.OutcomeResolved), flaky); v.Valid || v.Errored || v.Reason != "flaky: its tests do not give the same statuses every run (t1, t2)" {
		t.Errorf("flaky empty patch: %+v", v)
	}
	for _, tc := range []struct {
		gold, empty    api.Outcome
		valid, errored bool
		reason         string
	}{
		{api.OutcomeResolved, api.OutcomeUnresolved, true, false, ""},
		{api.OutcomeUnresolved, api.OutcomeUnresolved, false, false, "does not resolve"},
		{api.OutcomeResolved, api.OutcomeResolved, false, false, "empty patch resolves"},
		{api.OutcomeInfraError, api.OutcomeUnresolved, false, true, "gold patch: infra_error: why"},
		{api.OutcomeResolved, api.OutcomeTestTimeout, false, true, "empty patch: test_timeout"},
	} {
		v := Judge(r(tc.gold), r(tc.empty))
		if v.Valid != tc.valid || v.Errored != tc.errored || !strings.Contains(v.Reason, tc.reason) {
			t.Errorf("gold %s, empty %s: %+v", tc.gold, tc.empty, v)
		}
	}
}

func TestSpecDigest(t *testing.T) {
	f := newFixture(t)
	a, b := f.task(t, 0, ""), f.task(t, 0, "")
	c := f.task(t, 0, "instances:\n  "+a.ID()+":\n    eval_commands: [\"true\"]\n")
	if a.SpecDigest != b.SpecDigest || a.SpecDigest == c.SpecDigest {
		t.Fatalf("digests %s %s %s", a.SpecDigest, b.SpecDigest, c.SpecDigest)
	}
	if PatchDigest(nil) == PatchDigest(ptr("")) || PatchDigest(ptr("a")) == PatchDigest(ptr("b")) {
		t.Fatal("patch digests collide")
	}
}
