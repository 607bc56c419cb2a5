package cli

import (
	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/bench"
)

// newBenchCacheCmd is the preset of the environment-cache comparisons on
// the repository workloads.
func newBenchCacheCmd(g Host) *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "msb bench on the repository workloads: task ready, disk for N instances, first-time preparation",
		Example: `  msb bench cache --repo-source psf/requests=/work/repos/requests.git
  msb bench cache --workloads synthetic --disk-n 1,10,50 --files 5000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			preset(&f.o, []string{bench.WorkloadSynthetic, "real"}, []string{bench.MeasureReady, bench.MeasureDisk, bench.MeasurePrep})
			return runBench(cmd, g, f)
		},
	}
	f.register(cmd.Flags())
	return cmd
}
