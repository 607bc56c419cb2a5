//go:build !msblean

package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/harness"
)

func newValidateCmd(g *globals) *cobra.Command {
	var f evalFlags
	var repeat int
	cmd := &cobra.Command{
		Use:   "validate --dataset FILE",
		Short: "Admit instances for RL: the gold patch must resolve, an empty patch must not",
		Example: `  msb validate --dataset demo/dataset.jsonl --spec demo/specs.yaml --run-id v1
  msb validate --dataset verified.jsonl --instances astropy__astropy-12907 --workers 2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runValidate(cmd.Context(), g, &f, repeat)
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&f.runID, "run-id", "validate", "name of this run (rerun to resume)")
	registerRepeat(cmd, &repeat)
	return cmd
}

func runValidate(ctx context.Context, g *globals, f *evalFlags, repeat int) error {
	if err := checkRepeatFlag(repeat); err != nil {
		return err
	}
	o, err := f.options()
	if err != nil {
		return err
	}
	o.batch = true
	e, err := g.openEngine(ctx, o)
	if err != nil {
		return err
	}
	defer closeEngine(e, "validate")
	d, err := f.load(e)
	if err != nil {
		return err
	}
	out := harness.New(f.outDir)
	prog := newProgress("validating", 2*len(d.Selected), g.json)
	fmt.Fprintf(os.Stderr, "validating %d instances (gold and empty patch each), %d evaluations at once\n", len(d.Selected),
		min(f.workers, e.Concurrency(o.limits)))
	rep, runErr := e.RunValidation(ctx, engine.ValidateRun{RunID: f.runID, InstanceIDs: ids(d), Workers: f.workers,
		KeepErrors: f.keepErrors, SkippedRows: len(d.RowErrors), Progress: resultProgress(prog),
		BuildEvents: newBuildProgress(prog, "validating").event, Repeat: repeat}, out)
	prog.stop()
	return finishValidation(g, out, rep, runErr)
}

// finishValidation writes valid.json and invalid.json, prints the report
// and returns the command's error: none when every instance was judged
// and at least one is valid.
func finishValidation(g *globals, out *harness.Dir, rep api.ValidationReport, runErr error) error {
	valid, invalid, err := out.WriteValidation(rep)
	if err != nil {
		return err
	}
	rep.Files = map[string]string{"valid": valid, "invalid": invalid}
	for _, m := range []string{"gold", "empty"} {
		if p, err := out.SummaryPath(rep.RunID, m); err == nil {
			rep.Files["summary:"+m] = p
		}
	}
	if len(rep.NetworkRechecked) > 0 {
		if p, err := out.SummaryPath(rep.RunID+engine.NetworkRecheckSuffix, "gold"); err == nil {
			rep.Files["summary:gold"+engine.NetworkRecheckSuffix] = p
		}
	}
	if len(rep.OfflineRechecked) > 0 {
		if p, err := out.SummaryPath(rep.RunID+engine.OfflineRecheckSuffix, "gold"); err == nil {
			rep.Files["summary:gold"+engine.OfflineRecheckSuffix] = p
		}
	}
	if g.json {
		if err := printJSON(rep); err != nil {
			return err
		}
	} else if err := printValidations(rep); err != nil {
		return err
	}
	switch {
	case runErr != nil:
		return runErr
	case len(rep.Errored) > 0:
		return &exitError{code: exitFailure, msg: fmt.Sprintf("%d instances could not be judged (an evaluation ended without a verdict)", len(rep.Errored))}
	case len(rep.Valid) == 0:
		return &exitError{code: exitFailure, msg: "no instance is valid"}
	}
	return nil
}

func printValidations(rep api.ValidationReport) error {
	t := newTable("INSTANCE", "VALID", "GOLD", "EMPTY", "ENV", "TASK READY", "TESTS", "REASON")
	var problems []problem
	for _, v := range rep.Validations {
		t.row(v.InstanceID, fmt.Sprint(v.Valid), fmt.Sprintf("%s (reward %.0f)", v.Gold.Outcome, v.Gold.Reward),
			fmt.Sprintf("%s (reward %.0f)", v.Empty.Outcome, v.Empty.Reward), fmtNs(v.Gold.Timings.Env),
			fmtNs(v.Gold.Timings.TaskReady), fmtNs(v.Gold.Timings.Tests), firstLine(v.Reason))
		if !v.Valid {
			problems = append(problems, problem{v.InstanceID, v.Reason})
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	printProblems(os.Stdout, "Not valid", problems)
	fmt.Printf("\n%d of %d instances valid", len(rep.Valid), len(rep.Validations))
	if n := countValidations(rep, func(v api.Validation) bool { return v.NeedsNetwork }); n > 0 {
		fmt.Printf(" (%d not valid only for want of network: their gold patches resolve with --eval-network host)", n)
	}
	if n := countValidations(rep, func(v api.Validation) bool { return v.Flaky }); n > 0 {
		fmt.Printf(" (%d flaky: their gold patches failed, then resolved on a second run without network)", n)
	}
	if rep.SkippedRows > 0 {
		fmt.Printf(" (%d dataset rows skipped)", rep.SkippedRows)
	}
	fmt.Printf("; wrote %s and %s\n", rep.Files["valid"], rep.Files["invalid"])
	return nil
}

// countValidations counts the validations of rep for which marked is true.
func countValidations(rep api.ValidationReport, marked func(api.Validation) bool) int {
	n := 0
	for _, v := range rep.Validations {
		if marked(v) {
			n++
		}
	}
	return n
}
