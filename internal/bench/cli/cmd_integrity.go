package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/bench"
)

// errIntegrityFailed is a comparison that stopped on a failure (its
// report says which).
var errIntegrityFailed = errors.New("the integrity comparison failed")

// newBenchIntegrityCmd is `msb bench integrity`: what the integrity stage
// adds to an evaluation's wall time, on the demo instances.
func newBenchIntegrityCmd(g Host) *cobra.Command {
	o := bench.IntegrityOptions{}
	cmd := &cobra.Command{
		Use:   "integrity",
		Short: "Wall and CPU time of gold-patch evaluations with the integrity stage, per canary mode, and without it, on the demo instances",
		Long: `Evaluates the gold patches of the 4 embedded demo instances (offline) with the integrity stage
(static rules, canary tests, the pytest structured channel; as msb eval --integrity warn) in each
canary mode (separate: a sandbox of its own beside the harness's run; forked: the eval script's
set-up run once, its sandbox forked for the tests and the canary; inline: appended to the
harness's eval script) and without it (the harness's evaluation through the same engine),
interleaved, the order rotating, after one warm-up round; prints each mode's p50 and p90 of the
wall time, p50 of the CPU time of its sandboxes (where a cgroup accounts it), the ratios to the
harness's and the difference, and the load average. With --dataset, the rows named by --instances
are evaluated instead, from the environments in --cache (msb cache build them first).
docs/bench.md, "Integrity cost", has the method and results.`,
		Example: "  msb bench integrity\n  msb bench integrity --rounds 10 --json\n" +
			"  msb --cache /work/pycache bench integrity --dataset verified.jsonl --instances psf__requests-2317 --rounds 5",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Rounds < 1 {
				return fmt.Errorf("%w: --rounds %d: at least 1", errUsage, o.Rounds)
			}
			cfg, err := g.EngineConfig()
			if err != nil {
				return err
			}
			o.TmpDir = g.Env().TmpDir
			o.Progress = func(line string) { fmt.Fprintln(os.Stderr, "msb bench:", line) }
			rep := bench.Integrity(cmd.Context(), cfg, o)
			if g.JSON() {
				if err := printJSON(map[string]any{"report": rep, "summary": rep.Summary()}); err != nil {
					return err
				}
			} else {
				rep.WriteText(os.Stdout)
			}
			if rep.Failed != "" {
				return fmt.Errorf("%w: %s", errIntegrityFailed, rep.Failed)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&o.Rounds, "rounds", 30, "interleaved rounds: evaluations of each instance in each mode (after one warm-up round)")
	cmd.Flags().StringVar(&o.Dataset, "dataset", "", "evaluate this dataset's rows instead of the demo's, from --cache (build their environments first)")
	cmd.Flags().StringSliceVar(&o.IDs, "instances", nil, "with --dataset: only these instance ids (comma-separated)")
	cmd.Flags().BoolVar(&o.CanaryAfter, "canary-after", false, "admit one sandbox at a time: separate and forked run their canary after the harness's tests, not beside them")
	cmd.Flags().BoolVar(&o.CPUTime, "cpu-time", false, "give the sandboxes a CPU limit of every core, so cgroup v1 accounts their CPU time (it also schedules each as a group: compare wall times without it)")
	return cmd
}
