package cli

import (
	"errors"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/engine/host"
)

// BenchBinary is the benchmark's own command (cmd/msb-bench): the harness,
// its baselines and its plotting, which the msb binary does not link.
const BenchBinary = "msb-bench"

// ErrNoBench: msb bench cannot find the benchmark's binary.
var ErrNoBench = errors.New("msb bench needs the " + BenchBinary + " binary")

// ErrUsage marks an error in how a command was called (exit code 2), for
// the benchmark's commands, which live outside this package.
var ErrUsage = errUsage

// benchCommand, when set (by BenchMain, in msb-bench), is the real bench
// command; in msb, bench is newBenchForward.
var benchCommand func(BenchHost) *cobra.Command

func newBenchCmd(g *globals) *cobra.Command {
	if benchCommand != nil {
		return benchCommand(BenchHost{g: g})
	}
	return newBenchForward()
}

// newBenchForward is msb's `msb bench`: it runs msb-bench with the same
// arguments (flags included, unparsed), in place of msb.
func newBenchForward() *cobra.Command {
	return &cobra.Command{
		Use:   "bench",
		Short: "Measure msb against the paper's mechanism and podman (runs " + BenchBinary + ")",
		Long: `Runs the benchmark harness (docs/bench.md), which is its own binary, ` + BenchBinary + `, so that msb
does not link it: the one next to msb, else the one on PATH. make build builds both into bin/.
msb bench --help lists its commands and flags.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return benchSibling.exec(args)
		},
	}
}

// BenchMain is msb-bench's main: msb's CLI (global flags, settings, exit
// codes, signals) with args run as `msb bench args`, where bench is the
// command newCmd makes.
func BenchMain(args []string, newCmd func(BenchHost) *cobra.Command) int {
	benchCommand = newCmd
	return Main(append([]string{"bench"}, args...))
}

// BenchHost is what the benchmark's commands take from msb's CLI: the
// global flags and the settings resolved from them, as every msb command
// sees them. Its methods are valid once the command runs.
type BenchHost struct{ g *globals }

// BenchEnv is what msb reads from the environment for the benchmark.
type BenchEnv struct {
	PodmanImage, PodmanFlags, SwerexRemote string
	TmpDir                                 string
}

// JSON: --json was given.
func (h BenchHost) JSON() bool { return h.g.json }

// Logger logs to stderr with --verbose, else nowhere.
func (h BenchHost) Logger() *slog.Logger { return h.g.logger() }

// StateDir is the resolved state directory.
func (h BenchHost) StateDir() string { return h.g.settings.StateDir }

// CacheDir is the resolved environment cache directory.
func (h BenchHost) CacheDir() string { return h.g.settings.CacheDir }

// Env is the benchmark's part of the environment.
func (h BenchHost) Env() BenchEnv {
	e := h.g.env
	return BenchEnv{PodmanImage: e.PodmanImage, PodmanFlags: e.PodmanFlags, SwerexRemote: e.SwerexRemote, TmpDir: e.TmpDir}
}

// OpenHost opens the engine's Host for a long-running job: what killed
// msb processes left behind is collected first, and said. The benchmark
// measures the sandbox layer through Host.Runtime.
func (h BenchHost) OpenHost() (*host.Host, error) { return h.g.jobHost() }
