package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/minisandbox/msb/internal/task"
)

// The integrity comparison (`msb bench integrity`) measures what the
// integrity stage adds to an evaluation's wall time: the same gold-patch
// evaluations of the demo instances (or of a dataset's rows, from a
// cache that holds their environments) with it (on: the engine's Evaluate as
// `msb eval --integrity warn` runs it: static rules, canary tests appended
// to the eval script, the pytest structured channel) and without it (off).
// msb has no switch that turns the stage off, so off is the harness's
// evaluation done through the same engine: a sandbox of the instance
// (same layers, limits and admission), the patch applied, the harness's
// own eval script run, its log graded by the instance's grader. Off leaves
// out everything on does beyond the harness (canary, channel, the git diff
// and run log of the evaluation record), so the difference is an upper
// bound of the stage's cost. The grader's static rules run in both: they
// read the patch text only.

// Integrity modes of the comparison.
const (
	IntegrityOff = "off"
	IntegrityOn  = "on"
)

// integrityModes are the contenders, in the order of round 0.
var integrityModes = []string{IntegrityOff, IntegrityOn}

// IntegrityOptions size the integrity comparison.
type IntegrityOptions struct {
	// Rounds of evaluations of every demo instance in each mode, after
	// one warm-up round (which builds the environment).
	Rounds int
	// Instances is how many of the instances are evaluated (0: all).
	Instances int
	// Dataset, when set, is a dataset file whose rows are evaluated
	// instead of the demo's, with the engine's cache, repositories and
	// overrides as configured (the demo's are the comparison's own).
	Dataset string
	// IDs are the dataset's rows to evaluate (empty: all).
	IDs []string
	// Dir is the scratch directory (default a temp dir under TmpDir, removed after).
	Dir, TmpDir string
	// Progress receives a line per round (nil: none).
	Progress func(string)
}

// IntegrityReport is the comparison's result: each mode's evaluation wall
// times, the wall times of their eval scripts (on: the harness's tests and
// the canary), and the load average (/proc/loadavg's first three fields)
// before and after.
type IntegrityReport struct {
	Rounds      int                        `json:"rounds"`
	Source      string                     `json:"source"` // "demo" or the dataset file
	Instances   int                        `json:"instances"`
	Times       map[string][]time.Duration `json:"times_ns"`
	ScriptTimes map[string][]time.Duration `json:"script_times_ns"`
	LoadBefore  string                     `json:"load_before"`
	LoadAfter   string                     `json:"load_after"`
	Failed      string                     `json:"failed,omitempty"`
}

// IntegritySummary is the table of an IntegrityReport: for the whole
// evaluation (Eval) and its eval script alone (Script), each mode's
// sample count, p50 and p90 by nearest rank, the ratio of on's p50 to
// off's and their difference.
type IntegritySummary struct {
	Eval, Script IntegrityLine
}

// IntegrityLine compares the modes' distributions of one time.
type IntegrityLine struct {
	OffN, OnN      int
	OffP50, OffP90 time.Duration
	OnP50, OnP90   time.Duration
	Ratio          float64 // OnP50 / OffP50; 0 unless both modes have samples
	Diff           time.Duration
}

// Summary summarizes r's times (it leaves them as they are).
func (r IntegrityReport) Summary() IntegritySummary {
	return IntegritySummary{Eval: compareModes(r.Times), Script: compareModes(r.ScriptTimes)}
}

func compareModes(times map[string][]time.Duration) IntegrityLine {
	var l IntegrityLine
	l.OffN, l.OffP50, l.OffP90 = p50p90(times[IntegrityOff])
	l.OnN, l.OnP50, l.OnP90 = p50p90(times[IntegrityOn])
	if l.OffN > 0 && l.OnN > 0 && l.OffP50 > 0 {
		l.Ratio = float64(l.OnP50) / float64(l.OffP50)
		l.Diff = l.OnP50 - l.OffP50
	}
	return l
}

// p50p90 is the size, p50 and p90 by nearest rank of a copy of d.
func p50p90(d []time.Duration) (n int, p50, p90 time.Duration) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	sorted := append([]time.Duration(nil), d...)
	Summarize(sorted) // sorts it
	return len(sorted), sorted[rank(len(sorted), 50)], sorted[rank(len(sorted), 90)]
}

// WriteText prints r's table.
func (r IntegrityReport) WriteText(w io.Writer) error {
	s := r.Summary()
	fmt.Fprintf(w, "Integrity cost: gold-patch evaluations of %d instances (%s), %d interleaved rounds (order alternating)\n",
		r.Instances, r.Source, r.Rounds)
	fmt.Fprintf(w, "load average before %s, after %s\n\n", r.LoadBefore, r.LoadAfter)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "wall time\tintegrity\tn\tp50\tp90\ton/off p50\tdifference")
	for _, l := range []struct {
		name string
		l    IntegrityLine
	}{{"whole evaluation", s.Eval}, {"eval script (tests; on: + canary)", s.Script}} {
		fmt.Fprintf(tw, "%s\toff (harness's)\t%d\t%s\t%s\t\t\n", l.name, l.l.OffN, fmtDur(l.l.OffP50), fmtDur(l.l.OffP90))
		ratio, diff := "-", "-"
		if l.l.Ratio > 0 {
			ratio, diff = fmt.Sprintf("%.3f", l.l.Ratio), fmtDur(l.l.Diff)
		}
		fmt.Fprintf(tw, "\ton (warn)\t%d\t%s\t%s\t%s\t%s\n", l.l.OnN, fmtDur(l.l.OnP50), fmtDur(l.l.OnP90), ratio, diff)
	}
	tw.Flush()
	if s.Eval.Ratio > 0 {
		fmt.Fprintf(w, "\nintegrity adds %+.1f%% (%s) to the whole evaluation's p50; goal <= 5%%: %s\n",
			100*(s.Eval.Ratio-1), fmtDur(s.Eval.Diff), goalMet(s.Eval.Ratio))
	}
	if r.Failed != "" {
		fmt.Fprintf(w, "FAILED: %s\n", r.Failed)
	}
	return nil
}

func goalMet(ratio float64) string {
	if ratio <= 1.05 {
		return "met"
	}
	return "not met"
}

func fmtDur(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }

// loadAverage is /proc/loadavg's first three fields ("?" when unreadable).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// Integrity runs the integrity comparison with an engine opened from cfg
// (its cache and overrides the comparison's own, integrity warn). It
// stops at the first failure, which the report says.
func Integrity(ctx context.Context, cfg engine.Config, o IntegrityOptions) IntegrityReport {
	rep := IntegrityReport{Rounds: o.Rounds, Source: cmp.Or(o.Dataset, "demo"), Times: map[string][]time.Duration{}, ScriptTimes: map[string][]time.Duration{},
		LoadBefore: loadAverage()}
	err := runIntegrity(ctx, cfg, o, &rep)
	rep.LoadAfter = loadAverage()
	if err != nil {
		rep.Failed = err.Error()
	}
	return rep
}

func runIntegrity(ctx context.Context, cfg engine.Config, o IntegrityOptions, rep *IntegrityReport) error {
	cfg.Integrity = api.IntegrityWarn
	cfg.Spares = 0 // every sandbox of both modes starts when asked for
	var insts []dataset.Instance
	if o.Dataset == "" {
		dir := o.Dir
		if dir == "" {
			d, err := os.MkdirTemp(o.TmpDir, "msb-bench-integrity-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(d)
			dir = d
		}
		gen, err := demo.Generate(ctx, dir)
		if err != nil {
			return fmt.Errorf("generating the demo: %w", err)
		}
		if cfg.Overrides, err = spec.ParseOverrides([]byte(demo.SpecYAML(gen.PyVersion))); err != nil {
			return err
		}
		cfg.Cache = engine.CacheConfig{Dir: filepath.Join(dir, "cache")}
		insts = gen.Instances
	}
	e, err := engine.Open(ctx, cfg)
	if err != nil {
		return fmt.Errorf("opening the engine: %w", err)
	}
	defer e.Close()
	if o.Dataset != "" {
		d, err := e.LoadDataset(o.Dataset, dataset.Filter{IDs: o.IDs}, false)
		if err != nil {
			return fmt.Errorf("loading %s: %w", o.Dataset, err)
		}
		insts = d.Selected
	} else if err := e.Add(insts...); err != nil {
		return err
	}
	if o.Instances > 0 && o.Instances < len(insts) {
		insts = insts[:o.Instances]
	}
	rep.Instances = len(insts)
	n := 0 // evaluations of each mode so far: their order alternates
	for round := -1; round < o.Rounds && ctx.Err() == nil; round++ {
		for _, in := range insts {
			for _, i := range Order(n, len(integrityModes)) {
				mode := integrityModes[i]
				el, script, err := evaluateMode(ctx, e, cfg.Overrides, in, mode)
				if err != nil {
					return fmt.Errorf("round %d, %s, integrity %s: %w", round, in.InstanceID, mode, err)
				}
				if round >= 0 {
					rep.Times[mode] = append(rep.Times[mode], el)
					rep.ScriptTimes[mode] = append(rep.ScriptTimes[mode], script)
				}
			}
			n++
		}
		if o.Progress != nil {
			o.Progress(fmt.Sprintf("round %d of %d done (load %s)", round+1, o.Rounds, loadAverage()))
		}
	}
	return ctx.Err()
}

// evaluateMode grades in's gold patch with the integrity stage (on) or
// as the harness does (off) and returns the wall times of the evaluation
// and of its eval script; a verdict other than resolved (on: or a flag)
// is an error.
func evaluateMode(ctx context.Context, e *engine.Engine, ov *spec.Overrides, in dataset.Instance, mode string) (el, script time.Duration, err error) {
	if mode == IntegrityOff {
		return evaluateHarness(ctx, e, ov, in)
	}
	p := in.Patch
	start := time.Now()
	res, _, err := e.Evaluate(ctx, in.InstanceID, "gold", &p)
	el = time.Since(start)
	if err != nil {
		return 0, 0, err
	}
	if res.Outcome != api.OutcomeResolved || res.Report.Integrity != api.IntegrityOK {
		return 0, 0, fmt.Errorf("%w: %s (integrity %q) %s", errNotResolved, res.Outcome, res.Report.Integrity, res.Detail)
	}
	return el, time.Duration(res.Timings.Tests), nil
}

// errNotResolved is a gold patch that a mode did not grade resolved.
var errNotResolved = errors.New("gold patch not resolved")

// evaluateHarness is the off mode: the harness's evaluation of in's gold
// patch in a sandbox of the engine (the grading limits, no network, the
// grading environment for the tests), graded from the log alone.
func evaluateHarness(ctx context.Context, e *engine.Engine, ov *spec.Overrides, in dataset.Instance) (el, script time.Duration, err error) {
	t, err := task.New(in, ov)
	if err != nil {
		return 0, 0, err
	}
	g, err := grading.For(in, t.Spec.LogParser)
	if err != nil {
		return 0, 0, err
	}
	parse, err := grading.Lookup(t.Spec.LogParser)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	log, script, err := runHarness(ctx, e, t)
	if err != nil {
		return 0, 0, err
	}
	v := g.Judge(grading.Evaluation{InstanceID: in.InstanceID, Repo: in.Repo, Patch: &in.Patch, Log: log, Parse: parse,
		Expected: grading.Expected{FailToPass: in.FailToPass, PassToPass: in.PassToPass}})
	el = time.Since(start)
	if v.Outcome != api.OutcomeResolved {
		return 0, 0, fmt.Errorf("%w: %s %s: %s", errNotResolved, v.Outcome, v.Detail, lastLine(log))
	}
	return el, script, nil
}

// runHarness opens a sandbox of t's instance, applies its gold patch,
// runs the harness's eval script and returns its output and wall time.
func runHarness(ctx context.Context, e *engine.Engine, t *task.Task) (string, time.Duration, error) {
	sb, err := e.CreateSandbox(ctx, engine.SandboxRequest{InstanceID: t.ID(), MaxOutput: 64 << 20})
	if err != nil {
		return "", 0, err
	}
	defer sb.Close()
	if err := sb.WriteFile(ctx, task.PatchPath, []byte(strings.TrimSuffix(t.Instance.Patch, "\n")+"\n"), 0o644); err != nil {
		return "", 0, err
	}
	apply, err := sb.Exec(ctx, api.ExecRequest{Command: "git apply --verbose " + task.PatchPath + " 2>&1"})
	if err != nil {
		return "", 0, err
	}
	if apply.ExitCode != 0 {
		return "", 0, fmt.Errorf("git apply: exit %d: %s", apply.ExitCode, lastLine(apply.Stdout))
	}
	if err := sb.WriteFile(ctx, task.ScriptPath, []byte(task.EvalScript(t)), 0o755); err != nil {
		return "", 0, err
	}
	start := time.Now()
	res, err := sb.Exec(ctx, api.ExecRequest{Command: "/bin/bash " + task.ScriptPath + " 2>&1", Env: task.GradingEnv})
	script := time.Since(start)
	if err != nil {
		return "", 0, fmt.Errorf("running the tests: %w", err)
	}
	return res.Stdout, script, nil
}
