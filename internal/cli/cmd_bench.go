package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/minisandbox/msb/internal/api"

	"github.com/minisandbox/msb/internal/bench"
	"github.com/spf13/cobra"
)

func newBenchCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Measure msb against baselines in the same run"}
	cmd.AddCommand(newBenchSandboxCmd(g), newBenchCacheCmd(g), newBenchEvalCmd(g), newBenchAPICmd(g))
	return cmd
}

func newBenchSandboxCmd(g *globals) *cobra.Command {
	o := bench.SandboxOptions{}
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Sandbox start-up, session round trip, throughput and density, against the paper's mechanism and podman",
		Example: `  msb bench sandbox
  msb bench sandbox --iterations 500 --density 200 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rt, err := g.jobRuntime()
			if err != nil {
				return err
			}
			rows := bench.Sandbox(cmd.Context(), rt, o)
			if g.json {
				return json.NewEncoder(os.Stdout).Encode(map[string]any{"mode": rt.Mode(), "rows": rows})
			}
			fmt.Printf("mode: %s, %d CPUs\n\n", rt.Mode(), runtime.NumCPU())
			printRows(rows)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Iterations, "iterations", 200, "create→command→close rounds per method")
	f.IntVar(&o.RoundTrips, "round-trips", 2000, "session round trips")
	f.IntVar(&o.Workers, "workers", 2, "workers for the throughput run")
	f.DurationVar(&o.Duration, "duration", 5*time.Second, "length of the throughput run")
	f.IntVar(&o.Density, "density", 200, "idle sandboxes (with a session each) held at once")
	f.BoolVar(&o.Podman, "podman", true, "include podman run --rm when podman and MSB_BENCH_PODMAN_IMAGE are available")
	return cmd
}

func printRows(rows []bench.Row) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BENCHMARK\tN\tP50\tP95\tVALUE\tNOTE")
	for _, r := range rows {
		val := ""
		if r.Unit != "" {
			val = fmt.Sprintf("%.2f %s", r.Value, r.Unit)
		}
		note := r.Note
		if r.Failed != "" {
			note = "FAILED: " + r.Failed
		}
		p50, p95 := "", ""
		if r.Stats.N > 0 {
			p50, p95 = fmtDur(r.Stats.P50), fmtDur(r.Stats.P95)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", r.Name, r.Stats.N, p50, p95, val, note)
	}
	tw.Flush()
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func newBenchEvalCmd(g *globals) *cobra.Command {
	o := bench.EvalOptions{}
	cmd := &cobra.Command{
		Use:     "eval",
		Short:   "Per-instance overhead of an evaluation outside the test run, on the demo instances",
		Example: "  msb bench eval\n  msb bench eval --rounds 20 --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Rounds < 1 {
				return fmt.Errorf("%w: --rounds %d: at least 1", errUsage, o.Rounds)
			}
			cfg, err := g.settings.engineConfig(engineOptions{})
			if err != nil {
				return err
			}
			cfg.Logger = g.logger()
			o.PodmanImage, o.PodmanFlags, o.TmpDir = g.env.PodmanImage, strings.Fields(g.env.PodmanFlags), g.env.TmpDir
			rows := bench.Eval(cmd.Context(), cfg, o)
			if g.json {
				return printJSON(api.BenchReport{Rows: benchRows(rows)})
			}
			printRows(rows)
			return nil
		},
	}
	cmd.Flags().IntVar(&o.Rounds, "rounds", 10, "evaluations of each of the 4 demo instances (after one warm-up round)")
	cmd.Flags().BoolVar(&o.Podman, "podman", true, "include podman run --rm when podman and MSB_BENCH_PODMAN_IMAGE are available")
	return cmd
}

// benchRows is the wire form of benchmark rows.
func benchRows(rows []bench.Row) []api.BenchRow {
	out := make([]api.BenchRow, len(rows))
	for i, r := range rows {
		out[i] = api.BenchRow{Name: r.Name, N: r.Stats.N, P50Ns: int64(r.Stats.P50), P95Ns: int64(r.Stats.P95), Value: r.Value,
			Unit: r.Unit, Note: r.Note, Failed: r.Failed}
	}
	return out
}
