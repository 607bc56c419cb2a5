package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"text/tabwriter"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/eval"
	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/patch"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/spf13/cobra"
)

func newValidateCmd(g *globals) *cobra.Command {
	var f evalFlags
	cmd := &cobra.Command{
		Use:   "validate --dataset FILE",
		Short: "Admit instances for RL: the gold patch must resolve, an empty patch must not",
		Example: `  msb validate --dataset verified.jsonl --instances astropy__astropy-12907 --workers 2
  msb validate --dataset demo/dataset.jsonl --spec demo/specs.yaml --run-id v1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := runValidate(cmd.Context(), g, &f, nil)
			return err
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&f.runID, "run-id", "validate", "name of this run (rerun to resume)")
	return cmd
}

// Validation is one instance's admission.
type Validation struct {
	InstanceID string `json:"instance_id"`
	Valid      bool   `json:"valid"`
	Reason     string `json:"reason,omitempty"`
	// NeedsNetwork: the gold patch resolves only with --eval-network host.
	NeedsNetwork bool        `json:"needs_network,omitempty"`
	Gold         eval.Result `json:"gold"`
	Empty        eval.Result `json:"empty"`
}

// runValidate evaluates the gold and the empty patch of every instance,
// writes valid.json and invalid.json next to the run, and returns the
// validations. insts, when given, replaces loading --dataset.
func runValidate(ctx context.Context, g *globals, f *evalFlags, insts []dataset.Instance) ([]Validation, error) {
	var err error
	var ov *spec.Overrides
	if insts == nil {
		if insts, ov, err = f.load(); err != nil {
			return nil, err
		}
	} else if ov, err = loadOverrides(f.specFile); err != nil {
		return nil, err
	}
	o, err := f.options(g)
	if err != nil {
		return nil, err
	}
	o.Overrides = ov
	gold, empty := map[string]eval.Prediction{}, map[string]eval.Prediction{}
	for _, in := range insts {
		p := in.Patch
		if in.BugIsGoldPatch() {
			// SWE-smith: the gold patch introduces the bug; the repository
			// at base_commit is already broken, and reverting it fixes it.
			p = patch.Reverse(p)
		}
		gold[in.InstanceID] = eval.Prediction{InstanceID: in.InstanceID, Model: "gold", Patch: &p}
		none := ""
		empty[in.InstanceID] = eval.Prediction{InstanceID: in.InstanceID, Model: "empty", Patch: &none}
	}
	run := func(name string, preds map[string]eval.Prediction, gradeEmpty bool) ([]eval.Result, error) {
		oo := o
		oo.GradeEmpty = gradeEmpty
		r, err := eval.NewRunner(eval.RunOptions{Options: oo, RunID: f.runID, OutDir: f.outDir, Workers: f.workers})
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "%s patches of %d instances, %d workers\n", name, len(insts), r.Workers())
		_, res, err := r.Run(ctx, insts, preds, progressLine)
		fmt.Fprintln(os.Stderr)
		return res, err
	}
	goldRes, err := run("gold", gold, false)
	if err != nil {
		return nil, err
	}
	emptyRes, err := run("empty", empty, true)
	if err != nil {
		return nil, err
	}
	vals := judgeValidations(goldRes, emptyRes)
	if err := recheckWithNetwork(ctx, o, f, insts, gold, vals); err != nil {
		return vals, err
	}
	if err := writeValidations(filepath.Join(f.outDir, f.runID), vals); err != nil {
		return vals, err
	}
	if g.json {
		return vals, json.NewEncoder(os.Stdout).Encode(vals)
	}
	printValidations(vals)
	return vals, nil
}

func judgeValidations(gold, empty []eval.Result) []Validation {
	byID := map[string]*Validation{}
	var out []Validation
	for _, r := range eval.SortedResults(gold) {
		out = append(out, Validation{InstanceID: r.InstanceID, Gold: r})
	}
	for i := range out {
		byID[out[i].InstanceID] = &out[i]
	}
	for _, r := range empty {
		if v := byID[r.InstanceID]; v != nil {
			v.Empty = r
		}
	}
	for i := range out {
		v := &out[i]
		switch {
		case v.Gold.Outcome != grading.OutcomeResolved:
			v.Reason = fmt.Sprintf("gold patch: %s %s", v.Gold.Outcome, v.Gold.Detail)
		case v.Empty.Outcome == grading.OutcomeResolved:
			v.Reason = "an empty patch resolves it: its FAIL_TO_PASS tests do not fail at the base commit"
		case !v.Empty.Outcome.IsVerdict():
			v.Reason = fmt.Sprintf("empty patch: %s %s", v.Empty.Outcome, v.Empty.Detail)
		default:
			v.Valid = true
		}
	}
	return out
}

func writeValidations(dir string, vals []Validation) error {
	var valid []string
	invalid := map[string]string{}
	for _, v := range vals {
		if v.Valid {
			valid = append(valid, v.InstanceID)
		} else {
			invalid[v.InstanceID] = v.Reason
		}
	}
	sort.Strings(valid)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, v := range map[string]any{"valid.json": valid, "invalid.json": invalid} {
		b, _ := json.MarshalIndent(v, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func printValidations(vals []Validation) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tVALID\tGOLD\tEMPTY\tREASON")
	n := 0
	for _, v := range vals {
		if v.Valid {
			n++
		}
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%s\n", v.InstanceID, v.Valid, v.Gold.Outcome, v.Empty.Outcome, oneLine(v.Reason))
	}
	tw.Flush()
	fmt.Printf("\n%d of %d instances valid\n", n, len(vals))
}
