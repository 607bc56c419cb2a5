package task

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/grading/integrity"
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

// runCanary runs the evaluation's canary, when it has one and the
// harness's run completed, and appends the canary run's output (its part
// between the canary's markers) to the evaluation's log. Failing to open
// or run its sandbox is an infrastructure error: the canary's verdict is
// part of the evaluation's.
func (e *evaluation) runCanary() {
	c := e.ev.Canary
	if !c.Active() || !e.art.TestsRan || e.ev.TimedOut || e.ev.InfraErr != nil {
		return
	}
	start := time.Now()
	c = c.Place(e.t.Spec.TestCommand(e.t.Instance), e.t.Spec.TestDirectives(e.t.Instance.TestPatch), e.harnessStatuses())
	e.ev.Canary = c
	e.log.Printf("Integrity canary in %s (in the harness's selection: %v)", c.File, c.Placed())
	out, err := e.canaryOutput(c)
	if err != nil {
		e.log.Printf("Error running the integrity canary: %v", err)
		e.ev.InfraErr = fmt.Errorf("running the integrity canary: %w", err)
		return
	}
	part, ok := c.Output(out)
	if !ok {
		e.log.Printf("Integrity canary's output has no markers; its last lines:\n%s", lastLines(out, 20))
		return
	}
	e.ev.Log = strings.TrimSuffix(e.ev.Log, "\n") + "\n" + c.Start() + "\n" + part + c.End() + "\n"
	e.log.Printf("Integrity canary ran in a sandbox of its own in %.2f seconds", time.Since(start).Seconds())
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
// runs the canary's script; it returns the script's output.
func (e *evaluation) canaryOutput(c integrity.Canary) (string, error) {
	sb, err := Open(e.ctx, e.env, e.t, e.sandboxOptions())
	if err != nil {
		return "", fmt.Errorf("opening its sandbox: %w", err)
	}
	defer func() {
		if cerr := sb.Close(); cerr != nil {
			e.log.Printf("Error closing the canary's sandbox: %v", cerr)
		}
	}()
	if _, err := sb.ApplyPatch(e.ctx, *e.ev.Patch, nil); err != nil {
		return "", fmt.Errorf("%w: %w", errCanaryPatch, err)
	}
	var ch integrity.Channel
	if e.ev.Channel.Active() {
		ch = integrity.NewChannel(e.t.Spec.TestCmd)
	}
	script := selfRemoving(canaryScript(e.t, sb.RepoDir(), ch, c))
	if err := sb.WriteFile(e.ctx, ScriptPath, []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("writing %s: %w", ScriptPath, err)
	}
	res, err := sb.Exec(e.ctx, session.ExecRequest{Command: "/bin/bash " + ScriptPath, Timeout: e.o.testTimeout()})
	if err != nil {
		return "", fmt.Errorf("running %s: %w", ScriptPath, err)
	}
	return res.Output, nil
}
