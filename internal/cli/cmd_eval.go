//go:build !msblean

package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/harness"
)

func newEvalCmd(g *globals) *cobra.Command {
	var f evalFlags
	var preds string
	var repeat int
	cmd := &cobra.Command{
		Use:   "eval --dataset FILE --predictions FILE|gold --run-id ID",
		Short: "Grade predictions exactly as the SWE-bench harness does, each in a fresh sandbox",
		Example: `  msb eval --dataset demo/dataset.jsonl --spec demo/specs.yaml --predictions gold --run-id gold
  msb eval --dataset verified.jsonl --predictions preds.jsonl --run-id try1 --workers 4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runEval(cmd.Context(), g, &f, preds, repeat)
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&preds, "predictions", "", `predictions: instance_id, model_name_or_path, model_patch (JSON, JSONL or a dict by id), or "gold" for the reference fixes`)
	cmd.Flags().StringVar(&f.runID, "run-id", "", "name of this run; rerunning with it resumes (results of the same patch and spec are kept)")
	registerRepeat(cmd, &repeat)
	return cmd
}

func runEval(ctx context.Context, g *globals, f *evalFlags, predPath string, repeat int) error {
	if predPath == "" || f.runID == "" {
		return fmt.Errorf("%w: --predictions and --run-id are required", errUsage)
	}
	if err := checkRepeatFlag(repeat); err != nil {
		return err
	}
	o, err := f.options()
	if err != nil {
		return err
	}
	var preds []api.Prediction
	if predPath != dataset.GoldPredictions {
		if preds, err = dataset.LoadPredictions(predPath); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%w: --predictions: %w", errNoInput, err)
			}
			return err
		}
	}
	o.batch = true
	e, err := g.openEngine(ctx, o)
	if err != nil {
		return err
	}
	defer closeEngine(e, "eval")
	d, err := f.load(e)
	if err != nil {
		return err
	}
	if predPath == dataset.GoldPredictions {
		preds = dataset.Gold(d.Selected)
	} else if err := dataset.CheckPredictions(d, preds); err != nil {
		return err
	}
	preds = selected(d, preds)
	out := harness.New(f.outDir)
	prog := newProgress("evaluating", len(preds), g.json)
	fmt.Fprintf(os.Stderr, "evaluating %d predictions on %d instances, %d at once\n", len(preds), len(d.Selected),
		min(f.workers, e.Concurrency(o.limits)))
	rep, runErr := e.RunEvaluation(ctx, engine.EvalRun{RunID: f.runID, InstanceIDs: ids(d), Predictions: preds, Workers: f.workers,
		KeepErrors: f.keepErrors, SkippedRows: len(d.RowErrors), Progress: resultProgress(prog),
		BuildEvents: newBuildProgress(prog, "evaluating").event, Repeat: repeat}, out)
	prog.stop()
	rep.Files = map[string]string{}
	for _, s := range rep.Summaries {
		if p, err := out.SummaryPath(s.RunID, s.Model); err == nil {
			rep.Files["summary:"+s.Model] = p
		}
	}
	if g.json {
		if err := printJSON(rep); err != nil {
			return err
		}
	} else if err := printRunReport(rep); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	for _, s := range rep.Summaries {
		if s.ErrorInstances > 0 {
			return &exitError{code: exitFailure, msg: fmt.Sprintf("%d evaluations ended without a verdict (see error_ids in the summary)", errorCount(rep))}
		}
	}
	return nil
}

// selected keeps the predictions of the selected instances (the harness
// runs only those, and warns about nothing else).
func selected(d *dataset.Dataset, preds []api.Prediction) []api.Prediction {
	keep := map[string]bool{}
	for _, in := range d.Selected {
		keep[in.InstanceID] = true
	}
	var out []api.Prediction
	for _, p := range preds {
		if keep[p.InstanceID] {
			out = append(out, p)
		}
	}
	return out
}

func errorCount(rep api.RunReport) int {
	n := 0
	for _, s := range rep.Summaries {
		n += s.ErrorInstances
	}
	return n
}

// resultProgress feeds a run's results to the progress display.
func resultProgress(p *progress) engine.Progress {
	return func(done, total int, r api.EvalResult) {
		p.grow(total)
		how := ""
		if r.Resumed {
			how = " (kept from an earlier run: same patch and spec)"
		}
		p.step(fmt.Sprintf("%s %s: %s%s", r.Model, r.InstanceID, r.Outcome, how), !r.Outcome.IsVerdict() && r.Outcome != api.OutcomeEmptyPatch)
	}
}

func printRunReport(rep api.RunReport) error {
	t := newTable("INSTANCE", "MODEL", "OUTCOME", "REWARD", "APPLIED WITH", "ENV", "TASK READY", "TESTS", "DETAIL")
	var problems []problem
	for _, r := range rep.Results {
		t.row(r.InstanceID, r.Model, string(r.Outcome)+resumedMark(r), fmt.Sprintf("%.2f", r.Reward), or(r.ApplyMethod, "-"),
			fmtNs(r.Timings.Env), fmtNs(r.Timings.TaskReady), fmtNs(r.Timings.Tests), detailOf(r))
		if r.Outcome.IsError() {
			problems = append(problems, problem{r.InstanceID + " (" + r.Model + ", " + string(r.Outcome) + ")", r.Detail})
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	printProblems(os.Stdout, "Errors", problems)
	fmt.Println()
	for _, s := range rep.Summaries {
		fmt.Printf("%s: resolved %d of %d submitted (%d unresolved, %d empty patches, %d errors); summary %s\n", s.Model,
			s.ResolvedInstances, s.SubmittedInstances, s.UnresolvedInstances, s.EmptyPatchInstances, s.ErrorInstances, rep.Files["summary:"+s.Model])
	}
	if rep.Resumed > 0 {
		fmt.Printf("%d results kept from an earlier run of %s (same patch and spec)\n", rep.Resumed, rep.RunID)
	}
	return nil
}

func resumedMark(r api.EvalResult) string {
	if r.Resumed {
		return "*"
	}
	return ""
}

// registerRepeat adds --repeat to an evaluating command.
func registerRepeat(cmd *cobra.Command, repeat *int) {
	cmd.Flags().IntVar(repeat, "repeat", 1, fmt.Sprintf("run each evaluation's tests N times (at most %d), each in a fresh sandbox, and mark flaky the results whose tests flip", engine.MaxRepeat))
}

// checkRepeatFlag refuses a --repeat outside 1..engine.MaxRepeat.
func checkRepeatFlag(n int) error {
	if n < 1 || n > engine.MaxRepeat {
		return fmt.Errorf("%w: --repeat %d: from 1 to %d", errUsage, n, engine.MaxRepeat)
	}
	return nil
}
