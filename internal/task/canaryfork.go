package task

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/grading/integrity"
	"github.com/minisandbox/msb/internal/session"
)

// The forked canary mode (api.CanaryForked) runs the harness's eval script
// in two parts. The set-up, the script up to its test command (the shell's
// options, the cd, the spec's environment, the eval steps, the test files'
// reset and the test patch: evalPrelude), runs once, in the evaluation's
// sandbox. That sandbox is then committed and forked (EvalOptions.Fork)
// into two fresh sandboxes over the same files, and closed: one runs the
// harness's tests (the script from the structured channel's setup to the
// test files' final reset), the other the canary. Neither child has the
// other's history nor the set-up's (their cgroups, PID 1s and shells
// start at the fork), so a patch cannot tell them apart by it, and the
// canary pays no eval step of its own.
//
// The split is safe when what the set-up leaves for the test command is
// files alone, which the fork carries: so each child's script first sets
// the shell's state again, silently (no trace, no output: the log is the
// harness's), with the script's header and the eval steps that only
// export variables; every other eval step must be a command that cannot
// change the shell (no cd, source, set, conda activate ...), and the
// set-up must leave no process running (a fork carries none) and, where
// /tmp is a mount of its own (a fork's is new), nothing in /tmp. Where
// that does not hold the evaluation runs as separate (the tests in the
// set-up's sandbox, the canary in a sandbox of its own) and the report's
// integrity_notes says why (forkedNote).

// ForkPoint is a state of an evaluation sandbox that children start from
// (EvalOptions.Fork).
type ForkPoint struct {
	// Start starts a fresh task sandbox of the state: the same task,
	// limits, network and environment, no process of the forked one.
	Start func(ctx context.Context) (*Sandbox, error)
	// Release gives the state's layer back once no more child is to start
	// and every child is closed, and says for the run log what became of
	// it (dropped from the store, or kept and why).
	Release func() string
}

// forkedNote is the report's note for a forked evaluation run as separate.
func forkedNote(why string) string {
	return "canary forked: ran as separate: " + why
}

// exportStep is an eval step that only exports variables with values that
// expand nothing: it sets the shell's state and nothing else, so each
// child sets it again.
var exportStep = regexp.MustCompile(`^export(\s+[A-Za-z_][A-Za-z0-9_]*=("[^"$` + "`" + `\\]*"|'[^']*'|[^\s;&|<>()$` + "`" + `"'\\]*))+\s*$`)

// stateWords are the command words that change the shell running them
// (builtins, keywords, the shell functions environment managers define):
// an eval step that runs one may leave state the fork does not carry.
var stateWords = []string{".", "source", "cd", "pushd", "popd", "export", "unset", "set", "shopt", "alias", "unalias", "eval", "exec",
	"declare", "typeset", "local", "readonly", "trap", "umask", "ulimit", "hash", "enable", "builtin", "command", "exit", "return",
	"function", "{", "}", "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "select", "[[",
	"read", "readarray", "mapfile", "let", "getopts", "conda", "mamba", "micromamba", "nvm", "pyenv", "rbenv", "rvm", "sdk", "jenv",
	"module", "activate", "deactivate", "wait"}

// controlOps split a step into simple commands (quotes aside).
var controlOps = regexp.MustCompile(`\|\||[;|\n]`)

// forkSplit says whether the task's eval script can be split before its
// test command ("" when it can, else why not) and returns the eval steps
// each child sets again (the export-only ones).
func forkSplit(t *Task) (replay []string, why string) {
	for _, step := range t.Spec.EvalSteps() {
		if exportStep.MatchString(strings.TrimSpace(step)) {
			replay = append(replay, step)
			continue
		}
		if w := stateWord(step); w != "" {
			return nil, fmt.Sprintf("eval step %q may change the shell's state (%s), which a fork does not carry", step, w)
		}
	}
	return replay, ""
}

// stateWord is the first command of step whose word may change the
// shell (a bare assignment, a word that is not plain), or a background
// job (a process the fork would not carry); "" when there is none.
func stateWord(step string) string {
	if strings.Contains(step, "<<") {
		return "a here-document"
	}
	plain := strings.NewReplacer("&&", ";", ">&", ">", "&>", ">").Replace(unquoted(step))
	if strings.Contains(plain, "&") {
		return "a background job"
	}
	for _, cmd := range controlOps.Split(plain, -1) {
		words := strings.Fields(cmd)
		for len(words) > 0 && (words[0] == "!" || words[0] == "(" || assignment.MatchString(words[0])) {
			words = words[1:]
		}
		if len(words) == 0 {
			if strings.TrimSpace(cmd) != "" {
				return "an assignment"
			}
			continue
		}
		w := strings.TrimPrefix(words[0], "(")
		if slices.Contains(stateWords, w) || !plainWord.MatchString(w) {
			return w
		}
	}
	return ""
}

// assignment is a word that assigns a variable (a command's environment
// when a command follows it, the shell's when none does).
var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// plainWord is a command word without expansions.
var plainWord = regexp.MustCompile(`^[A-Za-z0-9_./+:@%-]+$`)

// unquoted is s with the text inside its quotes blanked out (x), so that
// the control operators in it are not taken for the step's.
func unquoted(s string) string {
	b := []byte(s)
	var q byte
	for i, c := range b {
		switch {
		case q == 0 && (c == '\'' || c == '"'):
			q = c
		case q != 0 && c == q:
			q = 0
		case q != 0:
			b[i] = 'x'
		}
	}
	return string(b)
}

// preludeDone is the exit status of the set-up's script (forkedPrelude)
// when it ran to its end; any other ended it early (the test patch did
// not apply, an unset variable under set -u), as the harness's script
// would have ended there.
const preludeDone = 97

// forkedPrelude is the set-up's script: the harness's up to its test
// command, ending silently with preludeDone.
func forkedPrelude(t *Task, dir string) string {
	var b strings.Builder
	evalPrelude(&b, t, dir)
	fmt.Fprintf(&b, "{ set +x; } 2>/dev/null\nexit %d\n", preludeDone)
	return b.String()
}

// forkedHead writes the start of a child's script to b: the shell's
// state as the set-up left it (the header, the spec's environment, the
// export-only eval steps), set without a trace, then the trace on.
func forkedHead(b *strings.Builder, t *Task, dir string, replay []string) {
	var p strings.Builder
	evalPreludeHead(&p, t, dir)
	head := strings.Replace(p.String(), "set -uxo pipefail", "set -uo pipefail", 1)
	b.WriteString(head)
	for _, s := range replay {
		b.WriteString(s + "\n")
	}
	b.WriteString("set -x\n")
}

// forkedTests is the harness's child's script: its tests as the harness's
// script runs them, after the shell's state.
func forkedTests(t *Task, dir string, replay []string, ch integrity.Channel) string {
	var b strings.Builder
	forkedHead(&b, t, dir, replay)
	b.WriteString(ch.Setup())
	writeTestPart(&b, t, ch, "", testReset(t))
	return b.String()
}

// forkedCanary is the canary's child's script.
func forkedCanary(t *Task, dir string, replay []string, ch integrity.Channel, c integrity.Canary) string {
	var b strings.Builder
	forkedHead(&b, t, dir, replay)
	b.WriteString(ch.Setup())
	b.WriteString(c.Script())
	return b.String()
}

// leftBehind lists, in a sandbox, the processes other than the listing
// shell (pid and name) and, when /tmp is a mount of its own, its entries
// but the patch's: what a fork of the sandbox would not carry.
const leftBehind = `for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = "$$" ] && continue; c=; read -r c < "$d/comm" 2>/dev/null; echo "process $p $c"; done
while read -r _ _ _ _ mp _; do [ "$mp" = /tmp ] && for f in /tmp/* /tmp/.[!.]*; do [ -e "$f" ] && [ "$f" != ` + PatchPath + ` ] && [ "$f" != ` + bugPath + ` ] && echo "file $f"; done; done < /proc/self/mountinfo; true`

// newLines are the lines of after (leftBehind's) not in before.
func newLines(before, after string) []string {
	was := map[string]bool{}
	for _, l := range strings.Split(before, "\n") {
		was[l] = true
	}
	var out []string
	for _, l := range strings.Split(after, "\n") {
		if l != "" && !was[l] {
			out = append(out, l)
		}
	}
	return out
}

// left is leftBehind's output in sb; ok false when it could not be read
// (the fork is then not made: runForked).
func (e *evaluation) left(sb *Sandbox) (string, bool) {
	res, err := sb.Exec(e.ctx, session.ExecRequest{Command: "/bin/bash -c '" + strings.ReplaceAll(leftBehind, "'", `'\''`) + "'", Timeout: time.Minute})
	if err != nil || res.ExitCode != 0 {
		return "", false
	}
	return res.Output, true
}

// forking reports whether the evaluation's tests run in a fork of its
// sandbox (the forked mode with a canary, a fork, a safe split); when
// the mode is forked and they do not, it adds the note saying why.
func (e *evaluation) forking() bool {
	if e.o.canary() != api.CanaryForked || !e.ev.Canary.Active() {
		return false
	}
	if e.o.Fork == nil {
		e.ev.CanaryNotes = append(e.ev.CanaryNotes, forkedNote("this evaluation cannot fork its sandbox"))
		return false
	}
	if _, why := forkSplit(e.t); why != "" {
		e.ev.CanaryNotes = append(e.ev.CanaryNotes, forkedNote(why))
		return false
	}
	return true
}

// runForked runs the harness's eval script split at its test command: the
// set-up in p, the tests in a child of p's fork (the canary starts in
// another, beside it when admitted); it returns what runTests does. Where
// the fork cannot be made, the tests run in p after the set-up (and the
// canary as separate's), with a note.
func (e *evaluation) runForked(p *Sandbox, before string) (string, bool, error) {
	replay, _ := forkSplit(e.t)
	base, baseOK := e.left(p)
	script := selfRemoving(forkedPrelude(e.t, p.RepoDir()))
	if err := p.WriteFile(e.ctx, ScriptPath, []byte(script), 0o755); err != nil {
		return "", false, fmt.Errorf("writing %s into the sandbox: %w", ScriptPath, err)
	}
	e.art.ScriptWritten = true
	e.log.Printf("Eval script for %s split at its test command (canary mode forked); its set-up written to %s, running it", e.t.ID(), ScriptPath)
	t0 := time.Now()
	res, err := p.Exec(e.ctx, session.ExecRequest{Command: "/bin/bash " + ScriptPath, Timeout: e.o.testTimeout()})
	setup := time.Since(t0)
	e.res.Timings.Tests = int64(setup)
	if err != nil {
		return res.Output, false, fmt.Errorf("running the tests: %w", err)
	}
	if res.TimedOut {
		e.art.TestsRan = true
		return e.timedOut(res.Output)
	}
	if res.ExitCode != preludeDone {
		// The harness's script ends here too: its log is this.
		e.art.TestsRan = true
		e.log.Printf("Eval script's set-up ended before the test command (exit status %d)", res.ExitCode)
		return res.Output, false, nil
	}
	e.log.Printf("Eval script's set-up took %.2f seconds", setup.Seconds())
	var why string
	if after, ok := e.left(p); !ok || !baseOK {
		why = "the set-up's sandbox could not be checked for processes it left"
	} else if l := newLines(base, after); len(l) > 0 {
		why = fmt.Sprintf("the eval steps left what a fork does not carry: %s", strings.Join(l, ", "))
	}
	e.forkPending = false
	var fp ForkPoint
	if why == "" {
		t1 := time.Now()
		fp, err = e.o.Fork(e.ctx, p)
		if err != nil {
			why = fmt.Sprintf("forking the sandbox after the eval steps: %v", err)
		} else {
			e.log.Printf("Sandbox forked after the eval steps in %.2f seconds", time.Since(t1).Seconds())
		}
	}
	remaining := e.o.testTimeout() - setup
	if why != "" {
		// As separate: the tests go on in p, the canary in its own.
		e.ev.CanaryNotes = append(e.ev.CanaryNotes, forkedNote(why))
		e.log.Printf("Integrity canary forked: %s; the tests run in the set-up's sandbox, the canary as separate's", why)
		e.forkedBeside = e.startCanary()
		out, timedOut, err := e.runTestPart(p, forkedTests(e.t, p.RepoDir(), replay, e.ev.Channel), remaining, before)
		return res.Output + out, timedOut, err
	}
	e.fork = &fp
	e.closeHarness()
	e.forkedBeside = e.startCanary()
	h, err := fp.Start(e.ctx)
	if err != nil {
		return res.Output, false, fmt.Errorf("starting the sandbox of the tests, forked after the eval steps: %w", err)
	}
	defer func() {
		e.res.Timings.CPU += int64(cpuOf(h))
		if err := h.Close(); err != nil {
			e.log.Printf("Error closing the tests' sandbox: %v", err)
		}
	}()
	e.log.Printf("Sandbox %s, forked after the eval steps, runs the tests", h.ID)
	out, timedOut, err := e.runTestPart(h, forkedTests(e.t, h.RepoDir(), replay, e.ev.Channel), remaining, before)
	return res.Output + out, timedOut, err
}

// runTestPart runs script, a forked evaluation's tests, in sb under
// timeout and reads what runTests reads after the tests: the exit status,
// the channel's report, the diff (compared with before).
func (e *evaluation) runTestPart(sb *Sandbox, script string, timeout time.Duration, before string) (string, bool, error) {
	if err := sb.WriteFile(e.ctx, ScriptPath, []byte(selfRemoving(script)), 0o755); err != nil {
		return "", false, fmt.Errorf("writing %s into the sandbox: %w", ScriptPath, err)
	}
	return e.execTests(sb, max(timeout, time.Second), before)
}

// forkedCanaryOutput is canaryOutput in a child of the evaluation's fork.
func (e *evaluation) forkedCanaryOutput(ctx context.Context, c integrity.Canary) (r canaryResult) {
	start := time.Now()
	defer func() { r.took = time.Since(start) }()
	sb, err := e.fork.Start(ctx)
	if err != nil {
		return canaryResult{err: fmt.Errorf("starting its sandbox, forked after the eval steps: %w", err)}
	}
	defer e.closeCanary(sb, &r)
	if err := e.canaryOpenedHook(sb); err != nil {
		return canaryResult{err: err}
	}
	replay, _ := forkSplit(e.t)
	return e.runCanaryScript(ctx, sb, forkedCanary(e.t, sb.RepoDir(), replay, e.canaryChannel(), c))
}
