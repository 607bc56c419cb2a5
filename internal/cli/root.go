package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/spf13/cobra"
)

// globals are the flags every command shares.
type globals struct {
	stateDir string
	verbose  bool
	json     bool
}

// Main runs the CLI with args and returns the process exit code.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	g := &globals{}
	root := newRootCmd(g)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintln(os.Stderr, "msb:", err)
	return exitCode(err)
}

func newRootCmd(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "msb",
		Short:         "MiniSandbox: container-free sandboxes for software-engineering agents",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.stateDir, "state-dir", envOr("MSB_STATE_DIR", ""), "where running sandboxes keep their state (env MSB_STATE_DIR; default /run/msb as root, $XDG_RUNTIME_DIR/msb otherwise)")
	pf.BoolVarP(&g.verbose, "verbose", "v", false, "log what msb does to stderr")
	pf.BoolVar(&g.json, "json", false, "machine-readable output")
	root.AddCommand(newRunCmd(g), newShellCmd(g), newDoctorCmd(g), newGCCmd(g), newDemoCmd(g), newBenchCmd(g), newCacheCmd(g))
	root.AddCommand(newValidateCmd(g), newEvalCmd(g), newSpecCmd(g))
	return root
}

// envOr reads configuration from the environment; this is the one place
// msb does so.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func (g *globals) logger() *slog.Logger {
	if !g.verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// runtime builds the sandbox runtime and collects what dead msb processes
// left behind, as every long-running command does at start.
func (g *globals) runtime() (*sandbox.Runtime, error) {
	rt, err := sandbox.NewRuntime(sandbox.RuntimeOptions{
		StateDir:     g.stateDir,
		CgroupParent: os.Getenv("MSB_CGROUP_PARENT"),
		Logger:       g.logger(),
	})
	if err != nil {
		return nil, err
	}
	return rt, nil
}

// jobRuntime is runtime for long-running commands, which first collect what
// killed msb processes left behind (as msb gc does) and say so.
func (g *globals) jobRuntime() (*sandbox.Runtime, error) {
	rt, err := g.runtime()
	if err != nil {
		return nil, err
	}
	if rep := rt.GC(); len(rep.Sandboxes)+len(rep.Cgroups) > 0 {
		fmt.Fprintf(os.Stderr, "msb: cleaned up after a killed msb: %d sandboxes, %d processes, %d cgroups\n",
			len(rep.Sandboxes), len(rep.Processes), len(rep.Cgroups))
	}
	return rt, nil
}

// exitError carries an exit code through cobra (e.g. msb run passing
// through the command's code).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Exit codes.
const (
	exitFailure       = 1
	exitUsage         = 2
	exitInvalidConfig = 3
	exitUnavailable   = 4 // the host cannot run sandboxes (see msb doctor)
)

// exitCode maps errors to exit codes; this is the only such map.
func exitCode(err error) int {
	switch {
	case errors.Is(err, sandbox.ErrInvalidConfig):
		return exitInvalidConfig
	case errors.Is(err, errUnavailable):
		return exitUnavailable
	case errors.Is(err, errUsage):
		return exitUsage
	}
	return exitFailure
}

var (
	errUsage       = errors.New("usage")
	errUnavailable = errors.New("sandboxes cannot run on this host")
)
