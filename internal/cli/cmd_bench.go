package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/engine"
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
			exe, err := benchExecutable()
			if err != nil {
				return err
			}
			// exec, not a child: signals, the terminal and the exit code
			// are the benchmark's own, as when msb linked it.
			if err := syscall.Exec(exe, append([]string{exe}, args...), os.Environ()); err != nil {
				return fmt.Errorf("running %s: %w", exe, err)
			}
			return nil
		},
	}
}

// benchExecutable finds msb-bench next to msb, else on PATH.
func benchExecutable() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the msb executable: %w", err)
	}
	next := filepath.Join(filepath.Dir(self), BenchBinary)
	if fi, err := os.Stat(next); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return next, nil
	}
	if p, err := exec.LookPath(BenchBinary); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w next to msb (%s) or on PATH: build it with make build, or go build -o %s ./cmd/msb-bench",
		ErrNoBench, next, next)
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
func (h BenchHost) OpenHost() (*engine.Host, error) { return h.g.jobHost() }

// EngineConfig is the engine's config from the settings (config file,
// environment, global flags).
func (h BenchHost) EngineConfig() (engine.Config, error) {
	cfg, err := h.g.settings.engineConfig(engineOptions{})
	cfg.Logger = h.g.logger()
	return cfg, err
}
