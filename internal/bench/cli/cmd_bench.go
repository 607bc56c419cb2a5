// Package cli is the benchmark's command line, `msb bench` and its
// presets (sandbox, cache, eval, api), run by cmd/msb-bench under msb's
// global flags and settings (a Host). msb itself links none of it: its
// bench command runs msb-bench.
package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/bench"
	msbcli "github.com/minisandbox/msb/internal/cli"
)

// Host is what the commands take from msb's CLI.
type Host = msbcli.BenchHost

var errUsage = msbcli.ErrUsage

// New is `msb bench`: every comparison of the harness (package bench), or
// a preset of them (sandbox, cache); `bench eval` and `bench api` are
// separate.
func New(g Host) *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure msb against the paper's mechanism and podman, interleaved, and write tables, CSV and PNG plots",
		Long: `Runs every comparison of the benchmark harness: task ready (create, first answer, close; warm
and cold), a whole process (msb run -- true, the paper's pipeline, podman run --rm), throughput, session and exec round trips, idle PSS, disk for N instances and first-time
preparation, for msb, the paper's mechanism and podman (skipped, and said so, when podman is not
installed). Rounds are interleaved with the method order rotated each round. Prints the tables and
writes samples.csv, summary.csv, summary.txt, summary.md, report.json and PNG plots into --out.
What it builds (workload caches, tarballs, podman images, a debootstrap base) stays in --work and is
reused by the next run. See docs/bench.md for the recipe on a fresh machine.`,
		Example: `  msb bench --repo-source psf/requests=/work/repos/requests.git
  msb bench --workloads bare --measures ready,roundtrip --rounds 10 --out /tmp/msb-bench
  msb bench --podman=false --density 50 --disk-n 1,10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runBench(cmd, g, f) },
	}
	f.register(cmd.Flags())
	cmd.AddCommand(newBenchSandboxCmd(g), newBenchCacheCmd(g), newBenchEvalCmd(g), newBenchAPICmd(g), newBenchForkCmd(g), newBenchIntegrityCmd(g), newBenchImagesCmd(g), newBenchE2BCmd(g), newBenchGoalsCmd(g))
	return cmd
}

// benchFlags are the flags of msb bench and its presets.
type benchFlags struct {
	o      bench.Options
	out    string
	source string
	podman bool
	// profiles of this process, where msb's host side (Prepare, Create,
	// Close) runs
	cpuProfile, trace string
}

func (f *benchFlags) register(fs *pflag.FlagSet) {
	o := &f.o
	fs.StringVar(&o.Work, "work", defaultBenchWork(), "work dir kept between runs (workload caches, tarballs, podman storage, base rootfs)")
	fs.StringVar(&f.out, "out", "msb-bench-out", "where the tables, CSV files and PNG plots are written")
	fs.StringSliceVar(&o.Measures, "measures", nil, "measures to run (default all): "+strings.Join(bench.AllMeasures, ","))
	fs.StringSliceVar(&o.Workloads, "workloads", nil, "workloads: bare, synthetic, real (default all three; real needs --repo-source)")
	fs.StringSliceVar(&o.Methods, "methods", nil, "methods compared (default all): msb, paper, podman, raw, msb-host")
	fs.IntVar(&o.Rounds, "rounds", 20, "interleaved rounds of the task-ready comparison")
	fs.IntVar(&o.Warmup, "warmup", 1, "rounds run first and not recorded")
	fs.BoolVar(&o.Cold, "cold", true, "add a cold trial (the method's own files dropped from the page cache) before each warm one")
	fs.IntVar(&o.Instances, "instances", 10, "instances (commits) the ready and throughput tasks of a repository workload cycle through")
	fs.IntSliceVar(&o.DiskNs, "disk-n", []int{1, 10, 50}, "task counts of the disk measure")
	fs.IntSliceVar(&o.Workers, "workers", []int{1, 2}, "worker counts of the throughput measure")
	fs.DurationVar(&o.Duration, "duration", 6*time.Second, "throughput: how long each method runs with each worker count")
	fs.IntVar(&o.ThroughputRounds, "slices", 3, "throughput: interleaved slices the duration is split into")
	fs.IntVar(&o.RoundTrips, "round-trips", 500, "round trips per method")
	fs.IntVar(&o.PodmanRoundTrips, "podman-round-trips", 50, "round trips of podman exec (each takes ~0.1 s)")
	fs.IntVar(&o.Density, "density", 200, "idle tasks with a shell held at once for the PSS measure")
	fs.DurationVar(&o.Idle, "idle", 10*time.Second, "how long the PSS measure's tasks sit idle before their memory is read")
	fs.IntVar(&o.IdleCommands, "idle-commands", 0, "commands (seq 1 400) each of the PSS measure's tasks runs after its first, before it sits idle, as an agent's sandbox has between steps")
	fs.IntVar(&o.PrepInstances, "prep-instances", 3, "instances prepared from nothing in the first-time preparation measure (the first builds the environment)")
	fs.IntVar(&o.Files, "files", 2000, "files in the synthetic repository")
	fs.IntVar(&o.FileSize, "file-size", 4096, "bytes per file of the synthetic repository")
	fs.StringVar(&f.source, "repo-source", "", "the real workload's repository, owner/name=PATH of a local clone (default repository psf/requests)")
	fs.StringVar(&o.Real.Package, "package", "", "the real workload's package under test (default requests)")
	fs.StringVar(&o.Real.Packages, "pip-packages", "", "the real workload's shared environment: pip packages, the test runner and the package's dependencies (default pytest requests)")
	fs.StringVar(&o.Python, "python", "/usr/bin/python3", "interpreter the environments are built with")
	fs.BoolVar(&f.podman, "podman", true, "compare with podman (skipped, and said so, when it is not installed)")
	fs.BoolVar(&o.API, "api", false, "add msb-api to the bare workload's throughput: the same tasks through msb serve's API (the msb next to msb-bench, else on PATH)")
	fs.BoolVar(&o.APIOpenSession, "api-open-session", false, "msb-api: open each task's session with a request of its own after the create (for a daemon whose create cannot open one)")
	fs.StringVar(&o.PodmanRootfs, "podman-rootfs", "", "root filesystem of podman's base image (default: debootstrap into the work dir)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of this process (msb's host side) to FILE (go tool pprof)")
	fs.StringVar(&f.trace, "trace", "", "write an execution trace of this process to FILE (go tool trace)")
}

// profile starts the profiles asked for and returns what stops them.
func (f *benchFlags) profile() (stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	if f.cpuProfile != "" {
		out, err := os.Create(f.cpuProfile)
		if err != nil {
			return stop, err
		}
		if err := pprof.StartCPUProfile(out); err != nil {
			out.Close()
			return stop, fmt.Errorf("cpu profile: %w", err)
		}
		stops = append(stops, func() { pprof.StopCPUProfile(); out.Close() })
	}
	if f.trace != "" {
		out, err := os.Create(f.trace)
		if err != nil {
			return stop, err
		}
		if err := trace.Start(out); err != nil {
			out.Close()
			return stop, fmt.Errorf("trace: %w", err)
		}
		stops = append(stops, func() { trace.Stop(); out.Close() })
	}
	return stop, nil
}

func defaultBenchWork() string {
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "msb-bench")
}

// options resolves the flags into bench.Options.
func (f *benchFlags) options() (bench.Options, error) {
	o := f.o
	o.Podman = f.podman
	if f.source != "" {
		repo, path, ok := strings.Cut(f.source, "=")
		if !ok || !strings.Contains(repo, "/") || path == "" {
			return o, fmt.Errorf("%w: --repo-source %q: want owner/name=PATH", errUsage, f.source)
		}
		def := bench.Requests
		if repo != def.Repo && (o.Real.Package == "" || o.Real.Packages == "") {
			return o, fmt.Errorf("%w: --repo-source %s: give --package and --pip-packages for a repository other than %s", errUsage, repo, def.Repo)
		}
		o.Real.Repo, o.Real.Source = repo, path
		if o.Real.Package == "" {
			o.Real.Package = def.Package
		}
		if o.Real.Packages == "" && repo == def.Repo {
			o.Real.Packages = def.Packages
		}
	}
	return o, nil
}

func runBench(cmd *cobra.Command, g Host, f *benchFlags) error {
	o, err := f.options()
	if err != nil {
		return err
	}
	h, err := g.OpenHost()
	if err != nil {
		return err
	}
	defer h.Close()
	o.Logger = g.Logger()
	o.MSBArgs = []string{"--state-dir", g.StateDir()} // msb run -- true as this run's own sandboxes
	o.Progress = progress
	stop, err := f.profile()
	if err != nil {
		stop()
		return err
	}
	rep, err := bench.Run(cmd.Context(), h.Runtime(), o)
	stop()
	return finishReport(g, f.out, rep, err)
}

// progress prints a run's steps on stderr.
func progress(line string) { fmt.Fprintln(os.Stderr, "msb bench:", line) }

// newBenchSandboxCmd is the preset of the sandbox comparisons on the bare
// workload.
func newBenchSandboxCmd(g Host) *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "msb bench on the bare workload: task ready, whole process, throughput, round trips, idle PSS",
		Example: `  msb bench sandbox
  msb bench sandbox --rounds 50 --density 200 --out /tmp/msb-bench-sandbox`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			preset(&f.o, []string{bench.WorkloadBare}, []string{bench.MeasureReady, bench.MeasureProcess, bench.MeasureThroughput, bench.MeasureRoundTrip, bench.MeasurePSS})
			return runBench(cmd, g, f)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// preset fills the workloads and measures the user left unset.
func preset(o *bench.Options, workloads, measures []string) {
	if len(o.Workloads) == 0 {
		o.Workloads = workloads
	}
	if len(o.Measures) == 0 {
		o.Measures = measures
	}
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
			p50, p95 = msbcli.FormatDuration(r.Stats.P50), msbcli.FormatDuration(r.Stats.P95)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", r.Name, r.Stats.N, p50, p95, val, note)
	}
	tw.Flush()
}

func newBenchEvalCmd(g Host) *cobra.Command {
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
			cfg, err := g.EngineConfig()
			if err != nil {
				return err
			}
			env := g.Env()
			o.PodmanImage, o.PodmanFlags, o.TmpDir = env.PodmanImage, strings.Fields(env.PodmanFlags), env.TmpDir
			rows := bench.Eval(cmd.Context(), cfg, o)
			if g.JSON() {
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

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing JSON output: %w", err)
	}
	return nil
}
