package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/minisandbox/msb/internal/store"
)

// globals are the flags every command shares, and the settings resolved
// from them, the environment and the config file before a command runs.
type globals struct {
	stateDir   string
	cacheDir   string
	configFile string
	verbose    bool
	json       bool

	env      environ   // read once, in Main
	settings *settings // resolved in the root's PersistentPreRunE
	flags    *pflag.FlagSet
}

// Main runs the CLI with args and returns the process exit code (see
// exitCode for the map).
func Main(args []string) int {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	defer func() { signal.Stop(sigs); close(done) }()
	go func() {
		select {
		case s := <-sigs:
			signal.Stop(sigs) // a second signal kills msb the default way
			fmt.Fprintf(os.Stderr, "\nmsb: %s: stopping (again to kill msb at once)\n", s)
			cancel(&interrupted{sig: s.(syscall.Signal)})
		case <-done:
		}
	}()
	g := &globals{env: readEnviron(os.LookupEnv)}
	root := newRootCmd(g)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if ie := (*interrupted)(nil); errors.As(context.Cause(ctx), &ie) && errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "msb:", err)
		return 128 + int(ie.sig)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(os.Stderr, "msb:", ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(os.Stderr, "msb:", err)
	return exitCode(err)
}

// interrupted is the cause of a context cancelled by a signal.
type interrupted struct{ sig syscall.Signal }

func (i *interrupted) Error() string { return "interrupted by " + i.sig.String() }

func newRootCmd(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "msb",
		Short:         "MiniSandbox: container-free sandboxes for software-engineering agents",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			s, err := resolveSettings(g)
			if err != nil {
				return err
			}
			g.settings = s
			return nil
		},
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w: %s (see %s --help)", errUsage, flagError(err), cmd.CommandPath())
	})
	pf := root.PersistentFlags()
	pf.StringVar(&g.stateDir, "state-dir", "", "where running sandboxes keep their state (env MSB_STATE_DIR; default /run/msb as root, $XDG_RUNTIME_DIR/msb otherwise)")
	pf.StringVar(&g.cacheDir, "cache", "", "environment cache directory (env MSB_CACHE; default $XDG_CACHE_HOME/msb or ~/.cache/msb)")
	pf.StringVar(&g.configFile, "config", "", "YAML config file (env MSB_CONFIG; see docs/config.md)")
	pf.BoolVarP(&g.verbose, "verbose", "v", false, "log what msb does to stderr")
	pf.BoolVar(&g.json, "json", false, "machine-readable output (the types of internal/api)")
	g.flags = pf
	root.AddCommand(newRunCmd(g), newShellCmd(g), newDoctorCmd(g), newGCCmd(g), newDemoCmd(g), newBenchCmd(g), newCacheCmd(g))
	root.AddCommand(newValidateCmd(g), newEvalCmd(g), newSpecCmd(g), newServeCmd(g))
	root.AddCommand(newSandboxCmd(g), newExecCmd(g), newSessionCmd(g), newCpCmd(g))
	for _, c := range root.Commands() {
		wrapArgs(c)
	}
	return root
}

// flagError says what a flag's value should have been, instead of the
// parser's own message (strconv.ParseInt: parsing "x": invalid syntax).
func flagError(err error) string {
	var ive *pflag.InvalidValueError
	if !errors.As(err, &ive) {
		return err.Error()
	}
	want := map[string]string{
		"int": "a whole number", "int64": "a whole number", "uint": "a whole number", "float64": "a number like 1.5",
		"duration": "a duration like 90s, 30m or 2h", "bool": "true or false", "intSlice": "whole numbers separated by commas",
	}[ive.GetFlag().Value.Type()]
	if want == "" {
		return err.Error()
	}
	return fmt.Sprintf("--%s %q: want %s", ive.GetFlag().Name, ive.GetValue(), want)
}

// wrapArgs makes a wrong number of arguments a usage error, like a bad flag.
func wrapArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return fmt.Errorf("%w: %v (see %s --help)", errUsage, err, cmd.CommandPath())
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}

func (g *globals) logger() *slog.Logger {
	if !g.verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// runtime builds the sandbox runtime alone (msb run, shell, doctor, gc).
func (g *globals) runtime() (*sandbox.Runtime, error) {
	return sandbox.NewRuntime(sandbox.RuntimeOptions{StateDir: g.settings.StateDir, CgroupParent: g.settings.CgroupParent, Logger: g.logger()})
}

// jobRuntime is runtime for long-running commands that drive sandboxes
// themselves (msb bench): it first collects what killed msb processes left
// behind, as msb gc does, and says so.
func (g *globals) jobRuntime() (*sandbox.Runtime, error) {
	rt, err := g.runtime()
	if err != nil {
		return nil, err
	}
	sayCollected(rt.GC())
	return rt, nil
}

// sayCollected says what a start-up GC found of killed msb processes'
// sandboxes; empty cgroups it tidied are no sign of one and go unsaid.
func sayCollected(rep sandbox.GCReport) {
	if rep.Found() {
		fmt.Fprintf(os.Stderr, "msb: cleaned up after a killed msb: %d sandboxes, %d processes, %d cgroups\n",
			len(rep.Sandboxes), len(rep.Processes), len(rep.Cgroups))
	}
}

// openEngine opens the engine with the settings and o's changes, and says
// what it cleaned up after killed msb processes.
func (g *globals) openEngine(ctx context.Context, o engineOptions) (*engine.Engine, error) {
	cfg, err := g.settings.engineConfig(o)
	if err != nil {
		return nil, err
	}
	cfg.Logger = g.logger()
	e, err := engine.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	sayCollected(e.GCReport())
	return e, nil
}

// exitError carries an exit code through cobra (msb run passing through
// the command's code; a batch whose instances did not all get a verdict),
// with a message to print, if any.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return fmt.Sprintf("exit status %d", e.code)
}

// Exit codes: the one map for every command (README "Exit codes").
const (
	exitOK = 0
	// exitFailure: the command ran but did not do all it should: an
	// instance ended without a verdict (eval), no instance is valid or one
	// could not be judged (validate), a build failed (cache build), the
	// cache is damaged (cache verify), or an operation failed.
	exitFailure = 1
	// exitUsage: the command cannot run as given: flags, arguments and
	// input files (dataset rows, predictions, spec files, ids, names).
	exitUsage = 2
	// exitInvalidConfig: a sandbox configuration that cannot be built.
	exitInvalidConfig = 3
	// exitUnavailable: the host cannot run sandboxes (see msb doctor).
	exitUnavailable = 4
	// 128+n: interrupted by signal n (130 for Ctrl-C, 143 for SIGTERM).
	// msb run and msb shell exit with the command's own code.
)

// exitCode maps errors to exit codes; this is the only such map.
func exitCode(err error) int {
	switch {
	case errors.Is(err, sandbox.ErrInvalidConfig):
		return exitInvalidConfig
	case errors.Is(err, errUnavailable):
		return exitUnavailable
	case errors.Is(err, errUsage), errors.Is(err, engine.ErrBadRequest), errors.Is(err, engine.ErrNoCache),
		errors.Is(err, dataset.ErrBadPredictions), errors.Is(err, dataset.ErrUnknownID), errors.Is(err, dataset.ErrUnknownFormat),
		errors.Is(err, dataset.ErrBadFilter), errors.Is(err, spec.ErrBadSpecFile), errors.Is(err, api.ErrBadName), errors.Is(err, errNoInput),
		errors.Is(err, engine.ErrNotFound), errors.Is(err, store.ErrBadRef):
		return exitUsage
	}
	return exitFailure
}

var (
	errUsage       = errors.New("usage")
	errUnavailable = errors.New("sandboxes cannot run on this host")
	// errNoInput: an input file named on the command line cannot be read.
	errNoInput = errors.New("cannot read input")
)
