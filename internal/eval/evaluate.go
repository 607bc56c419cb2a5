package eval

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
	"github.com/minisandbox/msb/internal/spec"
)

// ApplyCommands are tried in order to apply a model patch, as the harness
// does; the first that succeeds is recorded in Result.ApplyMethod.
var ApplyCommands = []string{
	"git apply --verbose",
	"git apply --verbose --reject",
	"patch --batch --fuzz=5 -p1 -i",
}

// Paths inside the evaluation sandbox.
const (
	modelPatchPath = "/tmp/msb-eval/model.patch"
	testPatchPath  = "/tmp/msb-eval/test.patch"
	bugPatchPath   = "/tmp/msb-eval/bug.patch"
)

// Options configure evaluations.
type Options struct {
	Cache     *envcache.Cache
	Runtime   *sandbox.Runtime
	Overrides *spec.Overrides
	// TestTimeout bounds the test command (default 30 minutes).
	TestTimeout time.Duration
	// Limits of each evaluation sandbox (default sandbox.DefaultLimits).
	Limits sandbox.Limits
	// GradeEmpty runs and grades empty patches (validation) instead of
	// reporting empty_patch.
	GradeEmpty bool
	// MaxLog caps the bytes of test output kept (default 64 MiB).
	MaxLog int
	// Reward is how Result.Reward is computed: binary (default, 1 when
	// resolved) or fraction (the share of graded tests that succeeded).
	Reward grading.RewardMode
	// Network of each evaluation sandbox: sandbox.NetworkNone (default,
	// loopback only) or sandbox.NetworkHost.
	Network string
}

// Result is one instance's evaluation.
type Result struct {
	InstanceID  string                   `json:"instance_id"`
	Model       string                   `json:"model_name_or_path"`
	Outcome     grading.Outcome          `json:"outcome"`
	Detail      string                   `json:"detail,omitempty"`
	Resolution  grading.Resolution       `json:"resolution,omitempty"`
	Reward      float64                  `json:"reward"`
	ApplyMethod string                   `json:"apply_method,omitempty"`
	Report      grading.InstanceReport   `json:"report"`
	Timings     map[string]time.Duration `json:"timings_ns"`
	Log         string                   `json:"-"` // test_output.txt
	Patch       string                   `json:"-"` // patch.diff
}

// Evaluate grades pred on inst in a fresh sandbox.
func Evaluate(ctx context.Context, o Options, inst dataset.Instance, pred Prediction) Result {
	res := Result{InstanceID: inst.InstanceID, Model: pred.Model, Timings: map[string]time.Duration{}}
	if pred.Patch != nil {
		res.Patch = *pred.Patch
	}
	ev := grading.Evaluation{InstanceID: inst.InstanceID, Repo: inst.Repo, Patch: pred.Patch, GradeEmpty: o.GradeEmpty,
		Expected: grading.Expected{FailToPass: inst.FailToPass, PassToPass: inst.PassToPass}}
	verdict := func() Result {
		v := grading.Judge(ev)
		res.Outcome, res.Detail, res.Report, res.Resolution = v.Outcome, v.Detail, v.Report, v.Resolution
		if v.Report.TestsStatus != nil {
			res.Reward = v.Report.TestsStatus.Reward(o.Reward)
		}
		res.Log = ev.Log
		return res
	}
	sp, err := spec.Resolve(inst, o.Overrides)
	if err != nil {
		ev.InfraErr = fmt.Errorf("resolving spec: %w", err)
		return verdict()
	}
	if ev.Parse, err = grading.Lookup(sp.LogParser); err != nil {
		ev.InfraErr = err
		return verdict()
	}
	empty := pred.Patch == nil || strings.TrimSpace(*pred.Patch) == ""
	if empty && !o.GradeEmpty {
		return verdict() // nothing to run
	}
	t := time.Now()
	prep, err := o.Cache.Prepare(ctx, inst, sp, nil)
	res.Timings["env"] = time.Since(t)
	if err != nil {
		if errors.Is(err, envcache.ErrEnvBuildFailed) {
			ev.EnvBuildErr = err
		} else {
			ev.InfraErr = fmt.Errorf("preparing layers: %w", err)
		}
		return verdict()
	}
	defer prep.Release()
	t = time.Now()
	sbConf := prep.SandboxConfig()
	sbConf.Limits = o.Limits
	sbConf.MaxOutput = o.maxLog()
	sbConf.Network = o.Network
	sb, err := o.Runtime.Create(ctx, sbConf)
	res.Timings["task_ready"] = time.Since(t)
	if err != nil {
		ev.InfraErr = fmt.Errorf("creating sandbox: %w", err)
		return verdict()
	}
	defer sb.Close()
	run := &instanceRun{ctx: ctx, o: o, sb: sb, inst: inst, sp: sp, res: &res}
	if inst.BugIsGoldPatch() {
		if ev.InfraErr = run.startWithBug(); ev.InfraErr != nil {
			return verdict()
		}
	}
	ev.ApplyErr, ev.InfraErr = run.applyModelPatch(res.Patch, empty)
	if ev.ApplyErr == nil && ev.InfraErr == nil {
		ev.Log, ev.TimedOut, ev.InfraErr = run.runTests()
	}
	t = time.Now()
	out := verdict()
	out.Timings["grading"] = time.Since(t)
	return out
}

func (o Options) maxLog() int {
	if o.MaxLog > 0 {
		return o.MaxLog
	}
	return 64 << 20
}

func (o Options) testTimeout() time.Duration {
	if o.TestTimeout > 0 {
		return o.TestTimeout
	}
	return 30 * time.Minute
}

// instanceRun is one evaluation in progress.
type instanceRun struct {
	ctx  context.Context
	o    Options
	sb   *sandbox.Sandbox
	inst dataset.Instance
	sp   spec.Spec
	res  *Result
}

func (r *instanceRun) exec(cmd string, timeout time.Duration) (session.Result, error) {
	return r.sb.Exec(r.ctx, session.ExecRequest{Command: cmd, Timeout: timeout})
}

// startWithBug puts a SWE-smith instance in its starting state: the base
// commit with the bug-introducing patch applied and committed, so that the
// model patch (a diff against that state) applies on top and HEAD is what
// test files are reset to.
func (r *instanceRun) startWithBug() error {
	if err := r.sb.WriteFile(r.ctx, bugPatchPath, []byte(withNewline(r.inst.Patch)), 0o644); err != nil {
		return fmt.Errorf("writing the bug patch into the sandbox: %w", err)
	}
	res, err := r.exec("cd /testbed && git apply "+bugPatchPath+" 2>&1 && git -c user.name=msb -c user.email=msb@localhost commit -qam 'SWE-smith bug' 2>&1", time.Minute)
	if err != nil {
		return fmt.Errorf("applying the bug patch: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("the instance's bug patch does not apply to %s: %s", r.inst.BaseCommit, lastLines(res.Output, 5))
	}
	return nil
}

func withNewline(s string) string {
	if s != "" && !strings.HasSuffix(s, "\n") {
		return s + "\n"
	}
	return s
}

// applyModelPatch applies the model patch with the first ApplyCommands entry
// that works. It returns (apply error, infrastructure error).
func (r *instanceRun) applyModelPatch(patch string, empty bool) (error, error) {
	t := time.Now()
	defer func() { r.res.Timings["patch"] = time.Since(t) }()
	if empty {
		return nil, nil
	}
	if err := r.sb.WriteFile(r.ctx, modelPatchPath, []byte(withNewline(patch)), 0o644); err != nil {
		return nil, fmt.Errorf("writing the model patch into the sandbox: %w", err)
	}
	var tried []string
	for _, c := range ApplyCommands {
		res, err := r.exec("cd /testbed && "+c+" "+modelPatchPath+" 2>&1", 5*time.Minute)
		if err != nil {
			return nil, fmt.Errorf("applying the model patch: %w", err)
		}
		if res.ExitCode == 0 {
			r.res.ApplyMethod = c
			return nil, nil
		}
		tried = append(tried, fmt.Sprintf("%s: exit %d: %s", c, res.ExitCode, lastLines(res.Output, 5)))
		// Undo a partial application before the next, more tolerant, try.
		r.exec("cd /testbed && git checkout -q -- . && git clean -fdq -e '*.rej' && find . -name '*.rej' -delete", time.Minute)
	}
	return fmt.Errorf("patch did not apply:\n%s", strings.Join(tried, "\n")), nil
}

// runTests writes the test_patch and runs the evaluation script; it returns
// the log, whether the tests timed out, and an infrastructure error.
func (r *instanceRun) runTests() (string, bool, error) {
	t := time.Now()
	defer func() { r.res.Timings["tests"] = time.Since(t) }()
	if err := r.sb.WriteFile(r.ctx, testPatchPath, []byte(withNewline(r.inst.TestPatch)), 0o644); err != nil {
		return "", false, fmt.Errorf("writing the test patch into the sandbox: %w", err)
	}
	script := EvalScript(r.inst, r.sp)
	res, err := r.exec(script, r.o.testTimeout())
	if err != nil {
		return res.Output, false, fmt.Errorf("running the tests: %w", err)
	}
	if res.TimedOut {
		return res.Output + "\n" + grading.TestsTimeout + "\n", true, nil
	}
	return res.Output, false, nil
}

// EvalScript is the shell script an evaluation runs in /testbed: the
// harness's eval.sh, with the test_patch read from a file. Test files are
// reset to HEAD, which is the base commit (for SWE-smith, the commit of the
// bug), the model patch being applied but not committed.
func EvalScript(inst dataset.Instance, sp spec.Spec) string {
	var b strings.Builder
	files := spec.TestFiles(inst.TestPatch)
	quoted := make([]string, len(files))
	for i, f := range files {
		quoted[i] = spec.ShellQuote(f)
	}
	reset := ""
	if len(files) > 0 {
		reset = "git checkout -q HEAD -- " + strings.Join(quoted, " ")
	}
	b.WriteString("cd /testbed\n")
	for k, v := range sp.Env {
		fmt.Fprintf(&b, "export %s=%s\n", k, spec.ShellQuote(v))
	}
	for _, c := range sp.EvalSteps() {
		b.WriteString(c + "\n")
	}
	if reset != "" {
		fmt.Fprintf(&b, "%s || echo '%s'\n", reset, grading.ResetFailed)
	}
	if inst.TestPatch != "" {
		fmt.Fprintf(&b, "git apply -v %s >&2 || { echo '%s'; exit 1; }\n", testPatchPath, grading.ApplyPatchFail)
	}
	fmt.Fprintf(&b, "echo '%s'\n", grading.StartTestOutput)
	b.WriteString(sp.TestCommand(inst) + "\n")
	b.WriteString("__msb_rc=$?\n")
	fmt.Fprintf(&b, "echo '%s'\n", grading.EndTestOutput)
	if reset != "" {
		b.WriteString(reset + "\n")
	}
	b.WriteString("exit $__msb_rc\n")
	return b.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
