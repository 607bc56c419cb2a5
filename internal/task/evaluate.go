package task

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/grading/integrity"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
	"github.com/minisandbox/msb/internal/spec"
)

// EvalOptions configure evaluations.
type EvalOptions struct {
	// Limits of each evaluation sandbox (zero fields: the sandbox defaults).
	Limits sandbox.Limits
	// TestTimeout bounds the eval script (default 30 minutes).
	TestTimeout time.Duration
	// MaxLog caps the bytes of test output kept (default 64 MiB).
	MaxLog int
	// Reward is how EvalResult.Reward is computed (default binary).
	Reward api.RewardMode
	// GradeEmpty runs and grades an empty patch (validation) instead of
	// reporting empty_patch without running anything.
	GradeEmpty bool
	// Network of the evaluation sandbox: sandbox.NetworkNone (the default,
	// no route out) or sandbox.NetworkHost.
	Network string
	// Progress receives the cache's build events.
	Progress envcache.Progress
	// Integrity is what a patch the integrity check finds tampered does
	// to the verdict: api.IntegrityFail (the default) or api.IntegrityWarn.
	Integrity api.IntegrityMode
	// Repeat is how many times the tests run, each in a fresh sandbox
	// (0 or 1: once). The result is the first run's, marked flaky when the
	// runs disagree (see Evaluate).
	Repeat int
	// Canary is where the integrity canary runs: api.CanaryForked (the
	// default where Fork is set, else api.CanarySeparate),
	// api.CanarySeparate, api.CanaryInline or api.CanaryOff.
	Canary api.CanaryMode
	// Fork, for api.CanaryForked, forks an evaluation's sandbox after
	// its eval steps (canaryfork.go): the engine's snapshot and fork.
	// Nil: a forked evaluation runs as separate, with a note.
	Fork func(ctx context.Context, sb *Sandbox) (ForkPoint, error)
	// Beside admits the canary's sandbox beside the harness's, without
	// waiting (CanarySeparate): ok false runs the canary after the
	// harness's run, in the room its closed sandbox leaves. Nil admits it
	// always.
	Beside func() (release func(), ok bool)
	// canaryOpened, for tests, is called once the canary's sandbox is
	// open: an error fails the canary's run as a sandbox failure would.
	canaryOpened func(*Sandbox) error
}

func (o EvalOptions) canary() api.CanaryMode {
	switch {
	case o.Canary != "":
		return o.Canary
	case o.Fork != nil:
		return api.CanaryForked
	}
	return api.CanarySeparate
}

// GradingEnv is the environment every grading sandbox adds to its
// environment's: what the SWE-bench harness's images fix for every run
// (their Dockerfiles' ENV TZ=Etc/UTC). The harness fixes the locale only
// in the specs that export it and PYTHONHASHSEED nowhere, so msb does not
// either: verdicts stay the harness's.
var GradingEnv = []string{"TZ=Etc/UTC"}

func (o EvalOptions) maxLog() int {
	if o.MaxLog > 0 {
		return o.MaxLog
	}
	return 64 << 20
}

func (o EvalOptions) network() string {
	if o.Network == "" {
		return sandbox.NetworkNone
	}
	return o.Network
}

func (o EvalOptions) testTimeout() time.Duration {
	if o.TestTimeout > 0 {
		return o.TestTimeout
	}
	return 30 * time.Minute
}

// Evaluation is one evaluation's result and the files it leaves.
type Evaluation struct {
	Result    api.EvalResult
	Artifacts api.EvalArtifacts
}

// Evaluate grades pred's patch on the task in a fresh sandbox, as the
// harness does: the patch applied with ApplyCommands, the eval script run
// under the timeout, the log judged. It never fails: what went wrong is the
// outcome (an infrastructure failure is never "unresolved").
//
// With o.Repeat N > 1 the tests run N times, each in a fresh sandbox; the
// result is the first run's, and when the runs' outcomes or any test's
// status differ, Result.Flaky and Report.Flaky are set and
// Report.FlakyTests names the tests that flipped.
func Evaluate(ctx context.Context, env Env, t *Task, pred api.Prediction, o EvalOptions) Evaluation {
	out, first := evaluateOnce(ctx, env, t, pred, o)
	if o.Repeat <= 1 || !out.Artifacts.Ran {
		return out
	}
	runs := []grading.StatusMap{first}
	outcomes := map[api.Outcome]bool{out.Result.Outcome: true}
	var log strings.Builder
	for i := 2; i <= o.Repeat && ctx.Err() == nil; i++ {
		again, st := evaluateOnce(ctx, env, t, pred, o)
		out.Result.Timings.Total += again.Result.Timings.Total
		outcomes[again.Result.Outcome] = true
		runs = append(runs, st)
		fmt.Fprintf(&log, "Repeat %d of %d for %s: %s\n", i, o.Repeat, t.ID(), again.Result.Outcome)
	}
	flips := grading.Flips(runs)
	r := &out.Result
	r.Runs = len(runs)
	r.Report.FlakyTests = flips
	r.Report.Flaky = len(flips) > 0 || len(outcomes) > 1
	r.Flaky = r.Report.Flaky
	fmt.Fprintf(&log, "Flaky: %v (%d runs; tests whose status flipped: %d)\n", r.Flaky, len(runs), len(flips))
	out.Artifacts.RunLog += log.String()
	return out
}

// evaluateOnce is one run of Evaluate; it also returns the statuses the
// grader read (empty without a verdict).
func evaluateOnce(ctx context.Context, env Env, t *Task, pred api.Prediction, o EvalOptions) (Evaluation, grading.StatusMap) {
	start := time.Now()
	e := &evaluation{ctx: ctx, env: env, t: t, o: o, log: &RunLog{}}
	e.res = api.EvalResult{InstanceID: t.ID(), Model: pred.Model, PatchDigest: PatchDigest(pred.ModelPatch), SpecDigest: t.SpecDigest,
		Network: o.network()}
	e.ev = grading.Evaluation{InstanceID: t.ID(), Repo: t.Instance.Repo, Patch: pred.ModelPatch, GradeEmpty: o.GradeEmpty, Parse: t.parse,
		Expected:  grading.Expected{FailToPass: t.Instance.FailToPass, PassToPass: t.Instance.PassToPass},
		TestPatch: t.Instance.TestPatch, TestCommand: t.Spec.TestCommand(t.Instance), Integrity: o.Integrity}
	if pred.ModelPatch != nil {
		e.art.Patch = *pred.ModelPatch
	}
	if !e.empty() || o.GradeEmpty {
		e.art.Ran = true
		e.drawIntegrity()
		var beside *canaryRun
		e.run(func() { beside = e.startCanary() })
		if e.forkedBeside != nil {
			beside = e.forkedBeside
		}
		e.finishCanary(beside)
		if e.fork != nil {
			e.log.Printf("%s", e.fork.Release())
		}
	}
	out, statuses := e.verdict()
	out.Result.Timings.Total = int64(time.Since(start))
	return out, statuses
}

// evaluation is one Evaluate in progress.
type evaluation struct {
	ctx context.Context
	env Env
	t   *Task
	o   EvalOptions
	log *RunLog
	res api.EvalResult
	art api.EvalArtifacts
	ev  grading.Evaluation

	// The forked canary mode (canaryfork.go): split says the tests run in
	// a fork of the sandbox after the eval steps, forkPending that the
	// fork is not made (or given up) yet; fork is the fork once made,
	// forkedBeside the canary started beside the tests in it, and
	// closeHarness closes the evaluation's sandbox (once: at the fork,
	// or at the end of run).
	split, forkPending bool
	fork               *ForkPoint
	forkedBeside       *canaryRun
	closeHarness       func()
}

// sandboxOptions are those of the evaluation's sandboxes.
func (e *evaluation) sandboxOptions() Options {
	return Options{Limits: e.o.Limits, MaxOutput: e.o.maxLog(), Network: e.res.Network, Progress: e.o.Progress, Env: GradingEnv,
		AsRoot: true}
}

func (e *evaluation) empty() bool {
	return e.ev.Patch == nil || strings.TrimSpace(*e.ev.Patch) == ""
}

// run runs the harness's evaluation in a fresh sandbox; opened, when not
// nil, is called once that sandbox is open.
func (e *evaluation) run(opened func()) {
	e.log.Printf("Evaluating %s (model %s) in a fresh sandbox (network %s)", e.t.ID(), e.res.Model, e.res.Network)
	sb, err := Open(e.ctx, e.env, e.t, e.sandboxOptions())
	if err != nil {
		e.log.Printf("Error creating the sandbox for %s: %v", e.t.ID(), err)
		if errors.Is(err, envcache.ErrEnvBuildFailed) {
			e.ev.EnvBuildErr = err
		} else {
			e.ev.InfraErr = err
		}
		return
	}
	e.closeHarness = sync.OnceFunc(func() {
		e.res.Timings.CPU += int64(cpuOf(sb))
		if err := sb.Close(); err != nil {
			e.log.Printf("Error closing the sandbox: %v", err)
			e.ev.InfraErr = errors.Join(e.ev.InfraErr, fmt.Errorf("closing the sandbox: %w", err))
		}
	})
	defer e.closeHarness()
	if opened != nil {
		opened()
	}
	e.res.Timings.Env, e.res.Timings.TaskReady = int64(sb.EnvTime), int64(sb.ReadyTime)
	e.log.Printf("Sandbox %s for %s started (layers %s, ready in %s)", sb.ID, e.t.ID(), sb.EnvTime.Round(time.Millisecond), sb.ReadyTime.Round(time.Millisecond))
	if !e.empty() {
		e.readBase(sb)
		t := time.Now()
		e.art.PatchWritten = true
		e.log.Printf("Patch for %s written to %s, now applying it", e.t.ID(), PatchPath)
		e.res.ApplyMethod, err = sb.ApplyPatch(e.ctx, *e.ev.Patch, e.log)
		e.res.Timings.Patch = int64(time.Since(t))
		if errors.Is(err, ErrPatchApply) {
			e.ev.ApplyErr = err
			return
		}
		if err != nil {
			e.ev.InfraErr = err
			return
		}
	}
	e.ev.Log, e.ev.TimedOut, e.ev.InfraErr = e.runTests(sb)
}

// baseFileLimit bounds a base file the integrity check reads.
const baseFileLimit = 4 << 20

// readBase reads, before the patch is applied, the repository's files
// that the integrity check reads whole (integrity.BasePaths): a file
// that is not there, or not readable, is left out, and the rules read
// its diff alone.
func (e *evaluation) readBase(sb *Sandbox) {
	e.ev.BaseFiles = map[string]string{}
	for _, p := range integrity.BasePaths(*e.ev.Patch) {
		if !filepath.IsLocal(p) {
			continue
		}
		b, err := sb.ReadFile(e.ctx, path.Join(sb.RepoDir(), p), baseFileLimit)
		if err != nil {
			continue
		}
		e.ev.BaseFiles[p] = string(b)
	}
	e.log.Printf("Integrity: read %d base files of %d the static rules ask for", len(e.ev.BaseFiles), len(integrity.BasePaths(*e.ev.Patch)))
}

// runTests writes and runs the eval script; it returns the log, whether
// the tests timed out, and an infrastructure error.
func (e *evaluation) runTests(sb *Sandbox) (string, bool, error) {
	before, err := e.gitDiff(sb)
	if err != nil {
		return "", false, err
	}
	e.log.Printf("Git diff before:\n%s", before)
	// eval.sh among the evaluation's files stays the harness's script, the
	// same for every evaluation of the task; the canary, random per
	// evaluation, runs in a sandbox of its own (startCanary, finishCanary)
	// unless the canary mode is inline, and the script in the sandbox
	// removes itself as it starts, as the canary's does. The structured
	// channel's setup runs before the start marker and its restore after
	// the exit status is recorded: between the markers the log is the
	// harness's.
	e.art.EvalScript = evalScript(e.t, sb.RepoDir(), integrity.Channel{}, "")
	if e.split {
		return e.runForked(sb, before)
	}
	script := e.art.EvalScript
	if !e.empty() {
		inline := ""
		if e.o.canary() == api.CanaryInline {
			inline = e.ev.Canary.Script()
		}
		script = evalScript(e.t, sb.RepoDir(), e.ev.Channel, inline)
		if e.ev.Canary.Active() {
			script = selfRemoving(script)
		}
	}
	if err := sb.WriteFile(e.ctx, ScriptPath, []byte(script), 0o755); err != nil {
		return "", false, fmt.Errorf("writing %s into the sandbox: %w", ScriptPath, err)
	}
	e.art.ScriptWritten = true
	e.log.Printf("Eval script for %s written to %s; running it", e.t.ID(), ScriptPath)
	return e.execTests(sb, e.o.testTimeout(), before)
}

// execTests runs the script written at ScriptPath in sb, within timeout,
// adding its time to the tests', and returns what runTests does.
func (e *evaluation) execTests(sb *Sandbox, timeout time.Duration, before string) (string, bool, error) {
	t := time.Now()
	res, err := sb.Exec(e.ctx, session.ExecRequest{Command: "/bin/bash " + ScriptPath, Timeout: timeout})
	e.res.Timings.Tests += int64(time.Since(t))
	if err != nil {
		return res.Output, false, fmt.Errorf("running the tests: %w", err)
	}
	e.art.TestsRan = true
	e.log.Printf("Test runtime: %.2f seconds", time.Since(t).Seconds())
	if res.TimedOut {
		return e.timedOut(res.Output)
	}
	return e.afterTests(sb, res.Output, before)
}

// timedOut is what runTests returns for tests of output that ran out of
// time: the output with the harness's timeout line.
func (e *evaluation) timedOut(output string) (string, bool, error) {
	e.log.Printf("Test timed out after %s", e.o.testTimeout())
	return output + fmt.Sprintf("\n\nTimeout error: %d seconds exceeded.", int(e.o.testTimeout().Seconds())), true, nil
}

// afterTests reads, once the tests of output ran in sb, their exit
// status, the structured channel's report and the diff (compared with
// before); it returns what runTests does.
func (e *evaluation) afterTests(sb *Sandbox, output, before string) (string, bool, error) {
	if code, ok := grading.ExitCodeOf(output); ok {
		e.res.TestExitCode = &code
	}
	e.readChannel(sb)
	after, err := e.gitDiff(sb)
	if err != nil {
		return output, false, err
	}
	e.log.Printf("Git diff after:\n%s", after)
	if after != before {
		e.log.Printf("Git diff changed after running eval script")
	}
	return output, false, nil
}

// readChannel reads the structured channel's report from the sandbox
// (nil when it is missing: Channel.Judge says so when the log claims
// passes the report cannot confirm).
func (e *evaluation) readChannel(sb *Sandbox) {
	if !e.ev.Channel.Active() {
		return
	}
	b, err := sb.ReadFile(e.ctx, e.ev.Channel.Report, int64(e.o.maxLog()))
	if err != nil {
		e.log.Printf("Structured channel report %s not read: %v", e.ev.Channel.Report, err)
		return
	}
	if b == nil {
		b = []byte{}
	}
	e.ev.ChannelReport = b
}

func (e *evaluation) gitDiff(sb *Sandbox) (string, error) {
	res, err := sb.run(e.ctx, "git -c core.fileMode=false diff", time.Minute)
	if err != nil {
		return "", fmt.Errorf("git diff: %w", err)
	}
	return strings.TrimSpace(res.Output), nil
}

func (e *evaluation) verdict() (Evaluation, grading.StatusMap) {
	t := time.Now()
	v := e.t.grader.Judge(e.ev)
	e.res.Outcome, e.res.Detail, e.res.Report, e.res.Resolution = v.Outcome, v.Detail, v.Report, v.Resolution
	e.res.Reward = v.Reward(e.o.Reward)
	e.res.Timings.Grading = int64(time.Since(t))
	if e.art.Ran {
		e.log.Printf("Result for %s: %s (resolved: %v)", e.t.ID(), v.Outcome, v.Report.Resolved)
		if v.Detail != "" {
			e.log.Printf("Detail: %s", v.Detail)
		}
	}
	e.art.TestOutput = e.ev.Log
	e.art.RunLog = e.log.String()
	return Evaluation{Result: e.res, Artifacts: e.art}, v.Statuses
}

// heredoc is the harness's delimiter for the test_patch in eval.sh.
const heredoc = "EOF_114329324912"

// EvalScript is the harness's eval.sh for the task: run in /testbed (an
// evaluation's cd is to the repository where the task sandbox has it) with
// the model patch applied (not committed), it sets the spec's environment,
// runs its eval steps (the eval commands, then the install again when the
// spec says eval_install), resets the test files to HEAD (the base commit;
// for SWE-smith the committed bug), applies the test_patch, runs the test
// command between the output markers, records its exit status after the end
// marker (the harness's newer scripts) and resets the test files again.
func EvalScript(t *Task) string { return evalScript(t, envcache.Testbed, integrity.Channel{}, "") }

// evalScript is EvalScript in the repository at dir, with the structured
// channel's setup before the start marker and its restore after the exit
// status line, then canary (an inline canary's script, "" for none)
// before the test files' final reset.
func evalScript(t *Task, dir string, c integrity.Channel, canary string) string {
	var b strings.Builder
	reset := evalPrelude(&b, t, dir)
	b.WriteString(c.Setup())
	writeTestPart(&b, t, c, canary, reset)
	return b.String()
}

// writeTestPart writes the eval script's part from its test command on
// to b: the markers around the test command, its exit status, the
// channel's restore, canary, and the test files' reset.
func writeTestPart(b *strings.Builder, t *Task, c integrity.Channel, canary, reset string) {
	fmt.Fprintf(b, "echo '%s'\n", grading.StartTestOutput)
	b.WriteString(t.Spec.TestCommand(t.Instance) + "\n")
	b.WriteString("SWEBENCH_TEST_EXIT_CODE=$?\n")
	fmt.Fprintf(b, "echo '%s'\n", grading.EndTestOutput)
	fmt.Fprintf(b, "echo \"%s: $SWEBENCH_TEST_EXIT_CODE\"\n", grading.TestExitCode)
	b.WriteString(c.Restore())
	b.WriteString(canary)
	if reset != "" {
		b.WriteString(reset + "\n")
	}
}

// evalPrelude writes the part of the eval script before its test command
// to b: the shell's options, the cd to dir, the spec's environment, the
// eval steps, the test files' reset and the test patch. It returns the
// reset command ("" when the task has no test files).
func evalPrelude(b *strings.Builder, t *Task, dir string) (reset string) {
	reset = testReset(t)
	evalPreludeHead(b, t, dir)
	for _, c := range t.Spec.EvalSteps() {
		b.WriteString(c + "\n")
	}
	if reset != "" {
		fmt.Fprintf(b, "%s || echo '%s'\n", reset, grading.ResetFailed)
	}
	if tp := t.Instance.TestPatch; tp != "" {
		delim := heredoc
		for strings.Contains(tp, delim) {
			delim += "_"
		}
		fmt.Fprintf(b, "git apply -v - <<'%s' || { echo '%s'; exit 1; }\n%s%s\n", delim, grading.ApplyPatchFail, withNewline(tp), delim)
	}
	return reset
}

// testReset is the command that puts the test files back as the base
// commit has them ("" when the task has no test files).
func testReset(t *Task) string {
	files := t.TestFiles()
	if len(files) == 0 {
		return ""
	}
	quoted := make([]string, len(files))
	for i, f := range files {
		quoted[i] = spec.ShellQuote(f)
	}
	return "git checkout -q HEAD -- " + strings.Join(quoted, " ")
}

// evalPreludeHead writes the eval script's header to b: the shell's
// options, the cd to dir, the spec's environment.
func evalPreludeHead(b *strings.Builder, t *Task, dir string) {
	b.WriteString("#!/bin/bash\nset -uxo pipefail\ncd " + spec.ShellQuote(dir) + "\n")
	env := maps.Clone(t.Spec.Env) // eval_env over env
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, t.Spec.EvalEnv)
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(b, "export %s=%s\n", k, spec.ShellQuote(env[k]))
	}
}

// Judge decides whether an instance is admitted from the evaluation of
// its reference fix (gold) and of an empty patch graded like any other
// (empty): gold must resolve and empty must not. When either evaluation
// ended without a verdict, the instance is not valid and Errored says the
// question is open, not answered. An instance whose repeated evaluations
// flipped (Flaky) is not valid either: its rewards would be noise.
func Judge(gold, empty api.EvalResult) api.Validation {
	v := api.Validation{InstanceID: gold.InstanceID, Gold: gold, Empty: empty}
	switch {
	case !gold.Outcome.IsVerdict():
		v.Reason, v.Errored = fmt.Sprintf("gold patch: %s: %s", gold.Outcome, gold.Detail), true
	case gold.Outcome != api.OutcomeResolved:
		v.Reason = "the gold patch does not resolve it" + failingTests(gold)
	case !empty.Outcome.IsVerdict():
		v.Reason, v.Errored = fmt.Sprintf("empty patch: %s: %s", empty.Outcome, empty.Detail), true
	case empty.Outcome == api.OutcomeResolved:
		v.Reason = "an empty patch resolves it: its FAIL_TO_PASS tests do not fail at the base commit"
	case gold.Flaky || empty.Flaky:
		v.Reason = "flaky: its tests do not give the same statuses every run" + flakyTests(gold, empty)
	default:
		v.Valid = true
	}
	return v
}

// flakyTests names the tests that flipped in gold's and empty's runs.
func flakyTests(gold, empty api.EvalResult) string {
	ids := slices.Concat([]string(gold.Report.FlakyTests), []string(empty.Report.FlakyTests))
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) == 0 {
		return ""
	}
	return " (" + strings.Join(ids, ", ") + ")"
}

// failingTests names the tests that kept a result from resolving.
func failingTests(r api.EvalResult) string {
	ts := r.Report.TestsStatus
	if ts == nil {
		if r.Detail != "" {
			return " (" + r.Detail + ")"
		}
		return ""
	}
	var parts []string
	if f := ts.FailToPass.Failure; len(f) > 0 {
		parts = append(parts, "FAIL_TO_PASS failing: "+strings.Join(f, ", "))
	}
	if f := ts.PassToPass.Failure; len(f) > 0 {
		parts = append(parts, "PASS_TO_PASS failing: "+strings.Join(f, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}
