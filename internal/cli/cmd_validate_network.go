package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/eval"
	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/sandbox"
)

// recheckWithNetwork evaluates again, with the host's network, the gold
// patches that did not resolve without it, and marks the instances that
// then resolve: they fail only without network (a test that reaches a
// server). Their verdict stays invalid; the reason says so.
func recheckWithNetwork(ctx context.Context, o eval.Options, f *evalFlags, insts []dataset.Instance, gold map[string]eval.Prediction, vals []Validation) error {
	if o.Network == sandbox.NetworkHost {
		return nil
	}
	idx := map[string]int{}
	var again []dataset.Instance
	for i, v := range vals {
		if v.Gold.Outcome == grading.OutcomeUnresolved {
			idx[v.InstanceID] = i
		}
	}
	for _, in := range insts {
		if _, ok := idx[in.InstanceID]; ok {
			again = append(again, in)
		}
	}
	if len(again) == 0 {
		return nil
	}
	o.Network = sandbox.NetworkHost
	r, err := eval.NewRunner(eval.RunOptions{Options: o, RunID: f.runID + "-eval-network-host", OutDir: f.outDir, Workers: f.workers})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "gold patches of %d unresolved instances again, with --eval-network host\n", len(again))
	_, res, err := r.Run(ctx, again, gold, progressLine)
	fmt.Fprintln(os.Stderr)
	if err != nil {
		return err
	}
	for _, g := range res {
		if g.Outcome == grading.OutcomeResolved {
			v := &vals[idx[g.InstanceID]]
			v.NeedsNetwork = true
			v.Reason += " (resolved with --eval-network host: fails only without network)"
		}
	}
	return nil
}
