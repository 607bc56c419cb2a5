package task

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/grading/integrity"
	"github.com/minisandbox/msb/internal/patch"
	"github.com/minisandbox/msb/internal/session"
)

// The canary's run (integrity.Canary) is kept secret from the harness's
// and made to look like it. It happens in a sandbox of its own, opened as
// the evaluation's was, with the model patch applied and the harness's
// script run up to its test command (environment, eval steps, test patch,
// and the structured channel when the harness's run has one); then the
// canary runs where the test command would. So the harness's run sees no
// canary file, name, command line or script, the canary's run finds no
// state the harness's left (and no sign of being second), and both run as
// `/bin/bash /eval.sh` under the same environment with the same plugins.
// Each script removes its own file as it starts: the tested code of
// either run finds no /eval.sh to read.

// selfRemoving is script (run as `/bin/bash <file>`) made to remove its
// file before anything else runs.
func selfRemoving(script string) string {
	shebang, rest, _ := strings.Cut(script, "\n")
	return shebang + "\nrm -f -- \"$0\"\n" + rest
}

// canaryScript is the canary sandbox's script: the harness's script up to
// its test command, the channel's setup, and the canary's run in the test
// command's place.
func canaryScript(t *Task, dir string, ch integrity.Channel, c integrity.Canary) string {
	var b strings.Builder
	evalPrelude(&b, t, dir)
	b.WriteString(ch.Setup())
	b.WriteString(c.Script())
	return b.String()
}

// Where the canary runs is the evaluation's canary mode (api.CanaryMode).
// Separate, the default, is the secret one above: its sandbox is opened as
// soon as the harness's is, and both run at once when admission has room
// for the second sandbox (EvalOptions.Beside); the evaluation then takes
// about the longer of the two runs instead of their sum, for the same CPU
// time. A Python canary's place in the harness's selection depends on the
// harness's run (Place: the host module must be one whose tests passed),
// so the canary started beside it is placed as if every selected module
// passed; when the harness's run shows another place, that canary is
// stopped and runs again, placed as it says, after the harness's run (as
// when admission has no room). Forked (canaryfork.go) is separate with
// the eval script's set-up run once: the canary's sandbox and the tests'
// are two forks of the sandbox that ran it, the canary's started beside
// the tests as separate's is. Inline appends the canary to the harness's
// eval script, after its tests (no second sandbox, no secrecy); off runs
// none.

// drawIntegrity draws the evaluation's structured channel and canary, for
// an evaluation of a patch.
func (e *evaluation) drawIntegrity() {
	if e.empty() {
		return
	}
	if e.t.grader == grading.SWEBench {
		// The channel's ids are read by grading's parsers, which the
		// other harnesses' graders do not use.
		e.ev.Channel = integrity.NewChannel(e.t.Spec.TestCmd)
	}
	if e.o.canary() == api.CanaryOff {
		e.ev.Canary = integrity.Canary{Note: canaryOffNote}
	} else {
		e.ev.Canary = integrity.NewCanary(e.t.Spec.TestCmd, patch.GitHeaderPaths(e.t.Instance.TestPatch))
	}
	e.split = e.forking()
	e.forkPending = e.split
	e.log.Printf("Integrity canary drawn: %v (mode %s; structured channel: %v)", e.ev.Canary.Active(), e.o.canary(), e.ev.Channel.Active())
}

// canaryOffNote is the report's note for an evaluation whose canary mode
// is off.
const canaryOffNote = "canary skipped: the canary mode is off (--canary off)"

// canaryRun is a canary started beside the harness's run.
type canaryRun struct {
	c       integrity.Canary // as placed before the harness's run
	cancel  context.CancelFunc
	release func()
	done    chan canaryResult
}

// canaryResult is what one run of the canary's sandbox gave.
type canaryResult struct {
	out  string
	err  error
	took time.Duration // open to close
	cpu  time.Duration // its processes' CPU time (0: unknown)
}

// wait waits for r's end and gives its reservation back.
func (r *canaryRun) wait() canaryResult {
	res := <-r.done
	r.cancel()
	r.release()
	return res
}

// stop ends r (its commands are killed) and waits for it.
func (r *canaryRun) stop() canaryResult {
	r.cancel()
	return r.wait()
}

// startCanary starts the canary's sandbox beside the harness's (mode
// separate, admission permitting); nil when the canary is to run after
// the harness's run, or not at all.
func (e *evaluation) startCanary() *canaryRun {
	c := e.ev.Canary
	if !c.Active() || !e.canaryApart() || e.forkPending {
		return nil
	}
	release := func() {}
	if e.o.Beside != nil {
		r, ok := e.o.Beside()
		if !ok {
			e.log.Printf("Integrity canary's sandbox not admitted beside the harness's: it runs after the harness's run")
			return nil
		}
		release = r
	}
	ctx, cancel := context.WithCancel(e.ctx)
	dirs := e.t.Spec.TestDirectives(e.t.Instance.TestPatch)
	r := &canaryRun{c: c.Place(e.t.Spec.TestCommand(e.t.Instance), dirs, allPassed(dirs)), cancel: cancel, release: release,
		done: make(chan canaryResult, 1)}
	go func() { r.done <- e.canaryOutput(ctx, r.c) }()
	return r
}

// canaryApart reports whether the canary runs in a sandbox of its own
// (separate, forked).
func (e *evaluation) canaryApart() bool {
	return e.o.canary() == api.CanarySeparate || e.o.canary() == api.CanaryForked
}

// allPassed are statuses under which Place puts the canary in the first
// module of directives, as a harness's run that passed a test of every
// module would.
func allPassed(directives []string) map[string]string {
	m := make(map[string]string, len(directives))
	for _, d := range directives {
		m[d] = "PASSED"
	}
	return m
}

// finishCanary completes the evaluation's canary once the harness's run
// is over: it waits for the one started beside it (beside, nil when none
// was) or runs it now, and appends the canary run's output (its part
// between the canary's markers) to the evaluation's log. A canary whose
// harness's run did not complete is stopped and not judged. Failing to
// open or run its sandbox is an infrastructure error: the canary's
// verdict is part of the evaluation's.
func (e *evaluation) finishCanary(beside *canaryRun) {
	c := e.ev.Canary
	if !c.Active() || e.o.canary() == api.CanaryInline || !e.art.TestsRan || e.ev.TimedOut || e.ev.InfraErr != nil {
		if beside != nil {
			beside.stop()
		}
		return
	}
	c = c.Place(e.t.Spec.TestCommand(e.t.Instance), e.t.Spec.TestDirectives(e.t.Instance.TestPatch), e.harnessStatuses())
	e.ev.Canary = c
	var res canaryResult
	if beside != nil && samePlace(beside.c, c) {
		res = beside.wait()
		e.addCanaryTimes(res)
		e.log.Printf("Integrity canary ran beside the harness's run, in %s (in the harness's selection: %v)", c.File, c.Placed())
	} else if beside != nil {
		e.log.Printf("Integrity canary started beside the harness's run in %s, but the harness's run puts it in %s: running it again", beside.c.File, c.File)
		e.addCanaryTimes(beside.stop())
		beside = nil
	}
	if beside == nil {
		e.log.Printf("Integrity canary in %s (in the harness's selection: %v), after the harness's run", c.File, c.Placed())
		res = e.canaryOutput(e.ctx, c)
		e.addCanaryTimes(res)
	}
	if res.err != nil {
		e.log.Printf("Error running the integrity canary: %v", res.err)
		e.ev.InfraErr = fmt.Errorf("running the integrity canary: %w", res.err)
		return
	}
	part, ok := c.Output(res.out)
	if !ok {
		e.log.Printf("Integrity canary's output has no markers; its last lines:\n%s", lastLines(res.out, 20))
		return
	}
	e.ev.Log = strings.TrimSuffix(e.ev.Log, "\n") + "\n" + c.Start() + "\n" + part + c.End() + "\n"
	e.log.Printf("Integrity canary's sandbox took %.2f seconds", res.took.Seconds())
}

// samePlace reports whether canaries a and b, drawn as one, run the same.
func samePlace(a, b integrity.Canary) bool {
	return a.File == b.File && a.Placed() == b.Placed()
}

// addCanaryTimes adds a run of the canary's sandbox to the timings.
func (e *evaluation) addCanaryTimes(r canaryResult) {
	e.res.Timings.Canary += int64(r.took)
	e.res.Timings.CanaryCPU += int64(r.cpu)
	e.res.Timings.CPU += int64(r.cpu)
}

// cpuOf is the CPU time sb's processes used so far (0 when no cgroup
// accounts it).
func cpuOf(sb *Sandbox) time.Duration {
	u, err := sb.Usage()
	if err != nil {
		return 0
	}
	return time.Duration(u.CPUNanos)
}

// harnessStatuses are the statuses the instance's parser reads in the
// harness's run (nil without a parser).
func (e *evaluation) harnessStatuses() map[string]string {
	if e.ev.Parse == nil {
		return nil
	}
	m, _ := grading.ParseEvalLog(e.ev.Parse, e.ev.Log)
	out := make(map[string]string, len(m))
	for id, st := range m {
		out[id] = string(st)
	}
	return out
}

// errCanaryPatch is a model patch that applied in the evaluation's
// sandbox and not in the canary's.
var errCanaryPatch = errors.New("the patch did not apply in the canary's sandbox")

// canaryOutput opens the canary's sandbox, applies the model patch and
// runs the canary's script (c) under ctx; it returns the script's output.
func (e *evaluation) canaryOutput(ctx context.Context, c integrity.Canary) (r canaryResult) {
	if e.fork != nil {
		return e.forkedCanaryOutput(ctx, c)
	}
	start := time.Now()
	defer func() { r.took = time.Since(start) }()
	o := e.sandboxOptions()
	o.Progress = nil // the harness's sandbox, opened first, reports the layers' builds
	sb, err := Open(ctx, e.env, e.t, o)
	if err != nil {
		return canaryResult{err: fmt.Errorf("opening its sandbox: %w", err)}
	}
	defer e.closeCanary(sb, &r)
	if err := e.canaryOpenedHook(sb); err != nil {
		return canaryResult{err: err}
	}
	if _, err := sb.ApplyPatch(ctx, *e.ev.Patch, nil); err != nil {
		return canaryResult{err: fmt.Errorf("%w: %w", errCanaryPatch, err)}
	}
	return e.runCanaryScript(ctx, sb, canaryScript(e.t, sb.RepoDir(), e.canaryChannel(), c))
}

// canaryChannel is a new structured channel for the canary's run when
// the evaluation reads one, else the inactive one.
func (e *evaluation) canaryChannel() integrity.Channel {
	if !e.ev.Channel.Active() {
		return integrity.Channel{}
	}
	return integrity.NewChannel(e.t.Spec.TestCmd)
}

// runCanaryScript writes script into sb, removing itself as it starts,
// and runs it: its output is the canary's.
func (e *evaluation) runCanaryScript(ctx context.Context, sb *Sandbox, script string) canaryResult {
	if err := sb.WriteFile(ctx, ScriptPath, []byte(selfRemoving(script)), 0o755); err != nil {
		return canaryResult{err: fmt.Errorf("writing %s: %w", ScriptPath, err)}
	}
	res, err := sb.Exec(ctx, session.ExecRequest{Command: "/bin/bash " + ScriptPath, Timeout: e.o.testTimeout()})
	if err != nil {
		return canaryResult{err: fmt.Errorf("running %s: %w", ScriptPath, err)}
	}
	return canaryResult{out: res.Output}
}

// closeCanary closes the canary's sandbox sb, recording its CPU time in r.
func (e *evaluation) closeCanary(sb *Sandbox, r *canaryResult) {
	r.cpu = cpuOf(sb)
	if err := sb.Close(); err != nil {
		e.log.Printf("Error closing the canary's sandbox: %v", err)
	}
}

// canaryOpenedHook runs the tests' hook on the canary's sandbox, if any.
func (e *evaluation) canaryOpenedHook(sb *Sandbox) error {
	if e.o.canaryOpened == nil {
		return nil
	}
	return e.o.canaryOpened(sb)
}
