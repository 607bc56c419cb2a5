package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
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
// integrity stage adds to an evaluation's wall time and CPU time: the
// same gold-patch evaluations of the demo instances (or of a dataset's
// rows, from a cache that holds their environments) with it, in each
// canary mode (api.CanaryMode: the engine's Evaluate as `msb eval
// --integrity warn --canary MODE` runs it: static rules, the canary, the
// pytest structured channel) and without it (off). msb has no switch that
// turns the whole stage off, so off is the harness's evaluation done
// through the same engine: a sandbox of the instance (same layers, limits
// and admission), the patch applied, the harness's own eval script run,
// its log graded by the instance's grader. Off leaves out everything the
// stage does beyond the harness (canary, channel, the git diff and run
// log of the evaluation record), so the difference is an upper bound of
// the stage's cost. The grader's static rules run in all modes: they read
// the patch text only.

// IntegrityOff is the comparison's mode without the integrity stage; the
// others are canary modes (api.CanaryMode).
const IntegrityOff = "off"

// integrityModes are the contenders, in the order of round 0.
var integrityModes = []string{IntegrityOff, string(api.CanarySeparate), string(api.CanaryForked), string(api.CanaryInline)}

// IntegrityOptions size the integrity comparison.
type IntegrityOptions struct {
	// Rounds of evaluations of every instance in each mode, after one
	// warm-up round (which builds the environment).
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
	// CPUTime gives every sandbox a CPU limit of every core, which limits
	// nothing but on cgroup v1 puts it in the cpu and cpuacct hierarchies:
	// its CPU time is then accounted (v2 accounts it always), and it is
	// scheduled as a group among the others of the msb cgroup, which
	// changes wall times under load (docs/bench.md, "Integrity cost").
	CPUTime bool
	// CanaryAfter admits one sandbox at a time (engine.Config.
	// MaxSandboxes 1): the separate and forked canaries then run after
	// the harness's tests, never beside them.
	CanaryAfter bool
}

// IntegritySample is one evaluation of the comparison: its wall time,
// the harness's eval script's (the tests; inline: and the canary;
// forked: its set-up and its tests), the canary's sandbox's (separate,
// forked: beside the tests, or after them) and the
// CPU time of its sandboxes' processes (0 where no cgroup accounts it).
type IntegritySample struct {
	Instance string        `json:"instance"`
	Mode     string        `json:"mode"`
	Round    int           `json:"round"`
	Wall     time.Duration `json:"wall_ns"`
	Script   time.Duration `json:"script_ns"`
	Canary   time.Duration `json:"canary_ns,omitempty"`
	CPU      time.Duration `json:"cpu_ns"`
}

// IntegrityReport is the comparison's result: every sample, and the load
// average (/proc/loadavg's first three fields) before and after.
type IntegrityReport struct {
	Rounds     int               `json:"rounds"`
	Source     string            `json:"source"` // "demo" or the dataset file
	Instances  int               `json:"instances"`
	Modes      []string          `json:"modes"`
	Samples    []IntegritySample `json:"samples"`
	LoadBefore string            `json:"load_before"`
	LoadAfter  string            `json:"load_after"`
	Failed     string            `json:"failed,omitempty"`
}

// IntegrityLine is one mode's distribution of its samples, compared with
// off's: sizes, p50 and p90 by nearest rank, on p50 / off p50 for the wall
// time (Ratio, Diff) and the CPU time (CPURatio), and the wall ratio of
// each instance's medians (PerRow, by instance id). A ratio is 0 unless
// both modes have samples (CPU: samples that know their CPU time).
type IntegrityLine struct {
	Mode      string             `json:"mode"`
	N         int                `json:"n"`
	WallP50   time.Duration      `json:"wall_p50_ns"`
	WallP90   time.Duration      `json:"wall_p90_ns"`
	ScriptP50 time.Duration      `json:"script_p50_ns"`
	CPUP50    time.Duration      `json:"cpu_p50_ns"`
	Ratio     float64            `json:"ratio,omitempty"`
	CPURatio  float64            `json:"cpu_ratio,omitempty"`
	Diff      time.Duration      `json:"diff_ns,omitempty"`
	PerRow    map[string]float64 `json:"per_row,omitempty"`
}

// IntegritySummary is the table of an IntegrityReport: a line per mode,
// off first.
type IntegritySummary struct {
	Lines []IntegrityLine
}

// Summary summarizes r's samples (it leaves them as they are).
func (r IntegrityReport) Summary() IntegritySummary {
	var s IntegritySummary
	off := r.line(IntegrityOff, nil)
	for _, m := range r.Modes {
		if m == IntegrityOff {
			s.Lines = append(s.Lines, off)
			continue
		}
		s.Lines = append(s.Lines, r.line(m, &off))
	}
	return s
}

// line summarizes mode's samples against off's (nil: off itself).
func (r IntegrityReport) line(mode string, off *IntegrityLine) IntegrityLine {
	l := IntegrityLine{Mode: mode, PerRow: map[string]float64{}}
	var wall, script, cpu []time.Duration
	rows := map[string][]time.Duration{}
	var ids []string
	for _, x := range r.Samples {
		if x.Mode != mode {
			continue
		}
		wall, script = append(wall, x.Wall), append(script, x.Script)
		if x.CPU > 0 {
			cpu = append(cpu, x.CPU)
		}
		if rows[x.Instance] == nil {
			ids = append(ids, x.Instance)
		}
		rows[x.Instance] = append(rows[x.Instance], x.Wall)
	}
	l.N, l.WallP50, l.WallP90 = p50p90(wall)
	_, l.ScriptP50, _ = p50p90(script)
	_, l.CPUP50, _ = p50p90(cpu)
	if off == nil || l.N == 0 || off.N == 0 || off.WallP50 <= 0 {
		return l
	}
	l.Ratio, l.Diff = float64(l.WallP50)/float64(off.WallP50), l.WallP50-off.WallP50
	if l.CPUP50 > 0 && off.CPUP50 > 0 {
		l.CPURatio = float64(l.CPUP50) / float64(off.CPUP50)
	}
	for _, id := range ids {
		_, mine, _ := p50p90(rows[id])
		if theirs := r.rowP50(IntegrityOff, id); theirs > 0 {
			l.PerRow[id] = float64(mine) / float64(theirs)
		}
	}
	return l
}

// rowP50 is the p50 wall time of mode's samples of instance id.
func (r IntegrityReport) rowP50(mode, id string) time.Duration {
	var d []time.Duration
	for _, x := range r.Samples {
		if x.Mode == mode && x.Instance == id {
			d = append(d, x.Wall)
		}
	}
	_, p50, _ := p50p90(d)
	return p50
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
	fmt.Fprintf(w, "Integrity cost: gold-patch evaluations of %d instances (%s), %d interleaved rounds (order rotating)\n",
		r.Instances, r.Source, r.Rounds)
	fmt.Fprintf(w, "load average before %s, after %s\n\n", r.LoadBefore, r.LoadAfter)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "integrity\tn\twall p50\twall p90\teval script p50\tratio / off\tdifference\tCPU p50\tCPU ratio\tper row (wall)")
	for _, l := range s.Lines {
		name := "canary " + l.Mode
		if l.Mode == IntegrityOff {
			name = "off (harness's)"
		}
		ratio, diff, cpuRatio := "-", "-", "-"
		if l.Ratio > 0 {
			ratio, diff = fmt.Sprintf("%.3f", l.Ratio), fmtDur(l.Diff)
		}
		if l.CPURatio > 0 {
			cpuRatio = fmt.Sprintf("%.2f", l.CPURatio)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, l.N, fmtDur(l.WallP50), fmtDur(l.WallP90), fmtDur(l.ScriptP50),
			ratio, diff, fmtCPU(l.CPUP50), cpuRatio, perRow(l.PerRow))
	}
	tw.Flush()
	for _, l := range s.Lines {
		if l.Ratio > 0 {
			fmt.Fprintf(w, "canary %s adds %+.1f%% (%s) to the whole evaluation's p50; goal <= 5%%: %s\n",
				l.Mode, 100*(l.Ratio-1), fmtDur(l.Diff), goalMet(l.Ratio))
		}
	}
	if r.Failed != "" {
		fmt.Fprintf(w, "FAILED: %s\n", r.Failed)
	}
	return nil
}

// perRow prints ratios by instance id, in id order.
func perRow(m map[string]float64) string {
	ids := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%s %.2f", id, m[id])
	}
	return strings.Join(parts, ", ")
}

func goalMet(ratio float64) string {
	if ratio <= 1.05 {
		return "met"
	}
	return "not met"
}

func fmtDur(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }

// fmtCPU is a CPU time, "-" when unknown.
func fmtCPU(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmtDur(d)
}

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
	rep := IntegrityReport{Rounds: o.Rounds, Source: cmp.Or(o.Dataset, "demo"), Modes: integrityModes, LoadBefore: loadAverage()}
	err := runIntegrity(ctx, cfg, o, &rep)
	rep.LoadAfter = loadAverage()
	if err != nil {
		rep.Failed = err.Error()
	}
	return rep
}

func runIntegrity(ctx context.Context, cfg engine.Config, o IntegrityOptions, rep *IntegrityReport) error {
	cfg.Integrity = api.IntegrityWarn
	cfg.Spares = 0 // every sandbox of every mode starts when asked for
	if o.CanaryAfter {
		cfg.MaxSandboxes = 1
	}
	if o.CPUTime && cfg.Limits.CPUs == 0 {
		cfg.Limits.CPUs = float64(runtime.NumCPU())
	}
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
	n := 0 // evaluations of each mode so far: their order rotates
	for round := -1; round < o.Rounds && ctx.Err() == nil; round++ {
		for _, in := range insts {
			for _, i := range Order(n, len(integrityModes)) {
				mode := integrityModes[i]
				x, err := evaluateMode(ctx, e, cfg.Overrides, in, mode)
				if err != nil {
					return fmt.Errorf("round %d, %s, integrity %s: %w", round, in.InstanceID, mode, err)
				}
				if round >= 0 {
					x.Instance, x.Mode, x.Round = in.InstanceID, mode, round
					rep.Samples = append(rep.Samples, x)
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

// evaluateMode grades in's gold patch with the integrity stage and the
// canary mode (a canary mode) or as the harness does (off) and returns its
// sample's times; a verdict other than resolved (with the stage: or a
// flag) is an error.
func evaluateMode(ctx context.Context, e *engine.Engine, ov *spec.Overrides, in dataset.Instance, mode string) (IntegritySample, error) {
	if mode == IntegrityOff {
		return evaluateHarness(ctx, e, ov, in)
	}
	p := in.Patch
	start := time.Now()
	res, _, err := e.EvaluateCanary(ctx, in.InstanceID, "gold", &p, api.CanaryMode(mode))
	el := time.Since(start)
	if err != nil {
		return IntegritySample{}, err
	}
	if res.Outcome != api.OutcomeResolved || res.Report.Integrity != api.IntegrityOK {
		return IntegritySample{}, fmt.Errorf("%w: %s (integrity %q) %s", errNotResolved, res.Outcome, res.Report.Integrity, res.Detail)
	}
	tm := res.Timings
	return IntegritySample{Wall: el, Script: time.Duration(tm.Tests), Canary: time.Duration(tm.Canary), CPU: time.Duration(tm.CPU)}, nil
}

// errNotResolved is a gold patch that a mode did not grade resolved.
var errNotResolved = errors.New("gold patch not resolved")

// evaluateHarness is the off mode: the harness's evaluation of in's gold
// patch in a sandbox of the engine (the grading limits, no network, the
// grading environment for the tests), graded from the log alone.
func evaluateHarness(ctx context.Context, e *engine.Engine, ov *spec.Overrides, in dataset.Instance) (IntegritySample, error) {
	t, err := task.New(in, ov)
	if err != nil {
		return IntegritySample{}, err
	}
	g, err := grading.For(in, t.Spec.LogParser)
	if err != nil {
		return IntegritySample{}, err
	}
	parse, err := grading.Lookup(t.Spec.LogParser)
	if err != nil {
		return IntegritySample{}, err
	}
	start := time.Now()
	log, x, err := runHarness(ctx, e, t)
	if err != nil {
		return IntegritySample{}, err
	}
	v := g.Judge(grading.Evaluation{InstanceID: in.InstanceID, Repo: in.Repo, Patch: &in.Patch, Log: log, Parse: parse,
		Expected: grading.Expected{FailToPass: in.FailToPass, PassToPass: in.PassToPass}})
	x.Wall = time.Since(start)
	if v.Outcome != api.OutcomeResolved {
		return IntegritySample{}, fmt.Errorf("%w: %s %s: %s", errNotResolved, v.Outcome, v.Detail, lastLine(log))
	}
	return x, nil
}

// runHarness opens a sandbox of t's instance, applies its gold patch,
// runs the harness's eval script and returns its output and the sample's
// script and CPU times.
func runHarness(ctx context.Context, e *engine.Engine, t *task.Task) (string, IntegritySample, error) {
	var x IntegritySample
	sb, err := e.CreateSandbox(ctx, engine.SandboxRequest{InstanceID: t.ID(), MaxOutput: 64 << 20})
	if err != nil {
		return "", x, err
	}
	defer sb.Close()
	if err := sb.WriteFile(ctx, task.PatchPath, []byte(strings.TrimSuffix(t.Instance.Patch, "\n")+"\n"), 0o644); err != nil {
		return "", x, err
	}
	apply, err := sb.Exec(ctx, api.ExecRequest{Command: "git apply --verbose " + task.PatchPath + " 2>&1"})
	if err != nil {
		return "", x, err
	}
	if apply.ExitCode != 0 {
		return "", x, fmt.Errorf("git apply: exit %d: %s", apply.ExitCode, lastLine(apply.Stdout))
	}
	if err := sb.WriteFile(ctx, task.ScriptPath, []byte(task.EvalScript(t)), 0o755); err != nil {
		return "", x, err
	}
	start := time.Now()
	res, err := sb.Exec(ctx, api.ExecRequest{Command: "/bin/bash " + task.ScriptPath + " 2>&1", Env: task.GradingEnv})
	x.Script = time.Since(start)
	if err != nil {
		return "", x, fmt.Errorf("running the tests: %w", err)
	}
	if u, err := sb.Usage(); err == nil {
		x.CPU = time.Duration(u.CPUNanos)
	}
	return res.Stdout, x, nil
}
