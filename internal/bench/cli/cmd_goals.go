package cli

import (
	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/bench"
)

// newBenchGoalsCmd is `msb bench goals`: issue 32's table in one run.
func newBenchGoalsCmd(g Host) *cobra.Command {
	f := &benchFlags{}
	var creates int
	var cache, dataset, specFile, instance string
	cmd := &cobra.Command{
		Use:   "goals",
		Short: "Every speed and memory goal of issue 32 in one run: the bare workload's comparisons, the daemon's API, the cache's size",
		Long: `Measures, in one run on one machine, each row of the speed goals (issue 32): msb run -- true against
the paper's pipeline and podman run; task ready without and with a spare, in the library and through
msb serve's API; tasks created, answered and closed per second through the API with 2 workers,
interleaved with the library, the paper and podman; the session round trip; idle PSS against
podman's; the size of the msb cache it is pointed at (--cache-dir). The load is sampled throughout.
Prints the goals table (measured, goal, met) before the comparisons' own tables and writes them into
--out as msb bench does. The daemon is the msb next to msb-bench, else on PATH.`,
		Example: `  msb bench goals --out /tmp/goals
  msb bench goals --rounds 5 --duration 1s --round-trips 50 --density 5 --idle 1s --creates 5 --podman=false`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("workers") {
				f.o.Workers = []int{2}
			}
			o, err := f.options()
			if err != nil {
				return err
			}
			exe, err := msbExecutable()
			if err != nil {
				return err
			}
			h, err := g.OpenHost()
			if err != nil {
				return err
			}
			defer h.Close()
			ao := bench.APIOptions{Exe: exe, StateDir: g.StateDir() + "-api-ready", Creates: creates, Instance: instance}
			cleanup, err := serveDataset(cmd, g, &ao, dataset, specFile)
			if err != nil {
				return err
			}
			defer cleanup()
			o.MSB = exe
			o.Logger = g.Logger()
			o.MSBArgs = []string{"--state-dir", g.StateDir()}
			o.Progress = progress
			stop, err := f.profile()
			if err != nil {
				stop()
				return err
			}
			rep, err := bench.Goals(cmd.Context(), h.Runtime(), bench.GoalsOptions{Options: o, APIReady: ao, Cache: first(cache, g.CacheDir())})
			stop()
			return finishReport(g, f.out, rep, err)
		},
	}
	f.register(cmd.Flags())
	fs := cmd.Flags()
	fs.IntVar(&creates, "creates", 30, "rounds of task ready through the API (each: without and with a spare, in a fresh bash and in the create's session)")
	fs.StringVar(&cache, "cache-dir", "", "the msb cache whose size the cache row reports (default: msb's cache)")
	fs.StringVar(&dataset, "dataset", "", "a dataset the API's daemon loads (default: the demo's, generated in a temp dir)")
	fs.StringVar(&specFile, "spec", "", "its spec file")
	fs.StringVar(&instance, "instance", "", "a cached instance for task ready through the API (default: the demo's first)")
	return cmd
}
