package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/minisandbox/msb/internal/eval"
	"github.com/spf13/cobra"
)

func newEvalCmd(g *globals) *cobra.Command {
	var f evalFlags
	var preds string
	cmd := &cobra.Command{
		Use:   "eval --dataset FILE --predictions FILE --run-id ID",
		Short: "Grade predictions exactly as the SWE-bench harness does, each in a fresh sandbox",
		Example: `  msb eval --dataset verified.jsonl --predictions preds.jsonl --run-id try1 --workers 4
  msb eval --dataset demo/dataset.jsonl --spec demo/specs.yaml --predictions gold.jsonl --run-id gold`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runEval(cmd.Context(), g, &f, preds)
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&preds, "predictions", "", "predictions: instance_id, model_name_or_path, model_patch (JSON, JSONL or a dict by id)")
	cmd.Flags().StringVar(&f.runID, "run-id", "", "name of this run; rerunning with it resumes (finished instances are kept)")
	return cmd
}

func runEval(ctx context.Context, g *globals, f *evalFlags, predPath string) error {
	if predPath == "" || f.runID == "" {
		return fmt.Errorf("%w: --predictions and --run-id are required", errUsage)
	}
	insts, ov, err := f.load()
	if err != nil {
		return err
	}
	preds, err := eval.LoadPredictions(predPath)
	if err != nil {
		return err
	}
	o, err := f.options(g)
	if err != nil {
		return err
	}
	o.Overrides = ov
	r, err := eval.NewRunner(eval.RunOptions{Options: o, RunID: f.runID, OutDir: f.outDir, Workers: f.workers})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "evaluating %d predictions on %d instances with %d workers\n", len(preds), len(insts), r.Workers())
	sum, results, err := r.Run(ctx, insts, preds, progressLine)
	fmt.Fprintln(os.Stderr)
	if g.json {
		json.NewEncoder(os.Stdout).Encode(map[string]any{"summary": sum, "results": eval.SortedResults(results)})
	} else {
		printResults(eval.SortedResults(results))
		fmt.Printf("\nresolved %d of %d submitted (%d errors, %d empty patches); summary: %s\n",
			sum.ResolvedInstances, sum.SubmittedInstances, sum.ErrorInstances, sum.EmptyPatchInstances, r.SummaryPath(modelOf(results)))
	}
	return err
}

func modelOf(rs []eval.Result) string {
	for _, r := range rs {
		if r.Model != "" {
			return r.Model
		}
	}
	return ""
}

// progressLine redraws one status line on stderr.
func progressLine(done, total int, res eval.Result, resumed bool) {
	how := ""
	if resumed {
		how = " (from an earlier run)"
	}
	width := 30
	fill := done * width / total
	fmt.Fprintf(os.Stderr, "\r[%s%s] %d/%d %s: %s%s\033[K", bar(fill, '#'), bar(width-fill, '.'), done, total, res.InstanceID, res.Outcome, how)
}

func bar(n int, c byte) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

func printResults(rs []eval.Result) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tOUTCOME\tAPPLIED WITH\tENV\tTASK READY\tTESTS\tDETAIL")
	for _, r := range rs {
		detail := r.Detail
		if len(detail) > 60 {
			detail = detail[:57] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.InstanceID, r.Outcome, r.ApplyMethod,
			fmtDur(r.Timings["env"]), fmtDur(r.Timings["task_ready"]), fmtDur(r.Timings["tests"]), oneLine(detail))
	}
	tw.Flush()
}
