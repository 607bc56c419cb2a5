package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/client"
	"github.com/minisandbox/msb/internal/engine/host"
)

// globals are the flags every command shares, and the settings resolved
// from them, the environment and the config file before a command runs.
type globals struct {
	stateDir   string
	cacheDir   string
	configFile string
	verbose    bool
	json       bool

	args     []string  // msb's arguments, as Main got them
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
	g := &globals{args: args, env: readEnviron(os.LookupEnv)}
	root := newRootCmd(g)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if ie := (*interrupted)(nil); errors.As(context.Cause(ctx), &ie) && errors.Is(err, context.Canceled) {
		err = &exitError{code: 128 + int(ie.sig), msg: err.Error(), kind: "interrupted"}
	}
	code, class := exitCode(err)
	reportError(os.Stderr, err, code, class, g.json || jsonArg(args))
	return code
}

// reportError says why msb failed on w: a line "msb: ...", or with --json
// one JSON object (api.CLIError), so that stdout holds only the command's
// answer. An exitError without a message (a command's own exit code) says
// nothing.
func reportError(w io.Writer, err error, code int, class string, asJSON bool) {
	var ee *exitError
	if errors.As(err, &ee) && ee.msg == "" {
		return
	}
	msg := errorMessage(err)
	if !asJSON {
		fmt.Fprintln(w, "msb:", msg)
		return
	}
	b, _ := json.Marshal(api.CLIError{Error: api.CLIErrorInfo{Code: class, Message: msg, ExitCode: code}})
	fmt.Fprintf(w, "%s\n", b)
}

// errorMessage is the text of err for a person: for an answer of the
// daemon, its message alone (the code is in the exit code and --json).
func errorMessage(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) && ce.Info.Message != "" {
		return ce.Info.Message
	}
	return err.Error()
}

// jsonArg reports whether --json is among args before "--" (for errors met
// before the flags were parsed, such as an unknown command).
func jsonArg(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "--json=true":
			return true
		}
	}
	return false
}

// interrupted is the cause of a context cancelled by a signal.
type interrupted struct{ sig syscall.Signal }

func (i *interrupted) Error() string { return "interrupted by " + i.sig.String() }

func newRootCmd(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "msb",
		Short:         "MiniSandbox: container-free sandboxes for software-engineering agents",
		Version:       buildVersion().String(),
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
	pf.StringVar(&g.stateDir, "state-dir", "", "where running sandboxes keep their state; must exist, but msb serve makes it (env MSB_STATE_DIR; default /run/msb as root, $XDG_RUNTIME_DIR/msb otherwise, made when missing)")
	pf.StringVar(&g.cacheDir, "cache", "", "environment cache directory; must exist, but cache build, import, pull, import-rootfs and serve make it (env MSB_CACHE; default $XDG_CACHE_HOME/msb or ~/.cache/msb, made when missing)")
	pf.StringVar(&g.configFile, "config", "", "YAML config file (env MSB_CONFIG; see docs/config.md)")
	pf.BoolVarP(&g.verbose, "verbose", "v", false, "log what msb does to stderr")
	pf.BoolVar(&g.json, "json", false, "machine-readable output (the types of internal/api)")
	g.flags = pf
	root.AddCommand(newRunCmd(g), newShellCmd(g), newDoctorCmd(g), newGCCmd(g), newBenchCmd(g))
	root.AddCommand(newSandboxCmd(g), newExecCmd(g), newSessionCmd(g), newCpCmd(g), newVersionCmd(g))
	root.AddCommand(newSnapshotCmds(g)...)
	// The verbs that need the engine (its cache, datasets, graders,
	// servers): their own commands here, forwarders to msb-full in the
	// lean msb (full.go, lean.go).
	root.AddCommand(fullCmds(g)...)
	root.SetVersionTemplate("msb {{.Version}}\n")
	wrapArgs(root)
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

// wrapArgs makes a wrong number of arguments a usage error, like a bad flag,
// and so an unknown command: a command that only groups others (msb, msb
// cache) takes no arguments of its own and prints its help when given none.
func wrapArgs(c *cobra.Command) {
	if c.HasSubCommands() && !c.Runnable() {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return nil
		}
		c.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
	}
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

// openHost opens the engine's Host: the sandbox runtime alone, without
// the cache (msb run, shell, doctor, gc).
func (g *globals) openHost() (*host.Host, error) {
	if err := checkDir("state-dir", g.settings.StateDir, g.settings.stateFlag, false); err != nil {
		return nil, err
	}
	return host.Open(host.Config{StateDir: g.settings.StateDir, CgroupParent: g.settings.CgroupParent, Logger: g.logger()})
}

// jobHost is openHost for long-running commands that drive sandboxes
// themselves (msb bench): it first collects what killed msb processes left
// behind, as msb gc does, and says so.
func (g *globals) jobHost() (*host.Host, error) {
	h, err := g.openHost()
	if err != nil {
		return nil, err
	}
	sayCollected(h.GC())
	return h, nil
}

// sayCollected says what a start-up GC found of killed msb processes'
// sandboxes; empty cgroups it tidied are no sign of one and go unsaid.
func sayCollected(rep host.GCReport) {
	if rep.Found() {
		fmt.Fprintf(os.Stderr, "msb: cleaned up after a killed msb: %d sandboxes, %d processes, %d cgroups, %d disk volumes\n",
			len(rep.Sandboxes), len(rep.Processes), len(rep.Cgroups), len(rep.Volumes))
	}
}

// exitError carries an exit code through cobra (msb run passing through
// the command's code; a batch whose instances did not all get a verdict),
// with a message to print, if any.
type exitError struct {
	code int
	msg  string
	kind string // the class for --json ("": failure for 1, else exit_status)
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
	// cache is damaged (cache verify), or an operation failed (the daemon
	// refused it in the state it is in: conflict, gone, quota).
	exitFailure = 1
	// exitUsage: the command cannot run as given: flags, arguments,
	// unknown commands and input files (dataset rows, predictions, spec
	// files, ids, names, a cache or state dir that does not exist), and
	// requests the daemon rejected as malformed or naming nothing it has.
	exitUsage = 2
	// exitInvalidConfig: a sandbox configuration that cannot be built,
	// here or by the daemon (invalid_config).
	exitInvalidConfig = 3
	// exitUnavailable: the host cannot run sandboxes (see msb doctor).
	exitUnavailable = 4
	// exitNotExecutable and exitNoCommand: msb run's or shell's command
	// could not start, as a shell says it: 126 found but not executable,
	// 127 not found.
	exitNotExecutable = 126
	exitNoCommand     = 127
	// 128+n: interrupted by signal n (130 for Ctrl-C, 143 for SIGTERM).
	// msb run and msb shell exit with the command's own code.
)

// Kinds of the CLI's own errors, beside the engine's (engine.Kind) and
// the daemon's answers: all of them are classes of one vocabulary, named
// in --json errors (api.CLIErrorInfo.Code).
const (
	// kindUsage: flags, arguments, an unknown command, an input file that
	// cannot be read, a directory named on the command line that does not
	// exist.
	kindUsage api.ErrorCode = "usage"
	// kindUnsupportedHost: this host cannot run sandboxes (msb doctor).
	kindUnsupportedHost api.ErrorCode = "unsupported_host"
)

// exitCodes is the exit code of each kind of error, for msb's own errors
// and the daemon's answers alike: a request the daemon (or the engine in
// msb) rejects as malformed or naming what it does not have is a usage
// error; one it cannot carry out now is a failure. A kind it does not name
// (a newer daemon's) is a failure too.
var exitCodes = map[api.ErrorCode]int{
	api.CodeBadRequest:       exitUsage,
	api.CodePathEscape:       exitUsage,
	api.CodeInvalidConfig:    exitInvalidConfig,
	api.CodeUnauthorized:     exitUsage,
	api.CodeNotFound:         exitUsage,
	api.CodeMethodNotAllowed: exitUsage,
	api.CodeConflict:         exitFailure,
	api.CodeSessionEnded:     exitFailure,
	api.CodeNoInstance:       exitUsage,
	api.CodeGone:             exitFailure,
	api.CodeBodyTooLarge:     exitUsage,
	api.CodeQuotaExceeded:    exitFailure,
	api.CodeInternal:         exitFailure,
	api.CodeUnavailable:      exitFailure,
	api.CodeTooLarge:         exitFailure,
	kindUsage:                exitUsage,
	kindUnsupportedHost:      exitUnavailable,
}

// exitCode maps errors to exit codes through their kind (kindOf and
// exitCodes), and names the kind for --json errors; an exitError carries
// its code and class itself. This is the only such map.
func exitCode(err error) (int, string) {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code, ee.class()
	}
	kind := kindOf(err)
	code, ok := exitCodes[kind]
	if !ok {
		code = exitFailure
	}
	return code, string(kind)
}

// kindOf is the kind of err: the code of the daemon's answer, the kind
// of one of the CLI's own errors, else the engine's kind of it.
func kindOf(err error) api.ErrorCode {
	var ce *client.Error
	switch {
	case errors.As(err, &ce):
		return ce.Info.Code
	case errors.Is(err, errUsage), errors.Is(err, errNoInput), errors.Is(err, errNoDir):
		return kindUsage
	case errors.Is(err, errUnavailable):
		return kindUnsupportedHost
	}
	return errKind(err)
}

// class names an exitError's code for --json.
func (e *exitError) class() string {
	switch {
	case e.kind != "":
		return e.kind
	case e.code == exitFailure:
		return "failure"
	}
	return "exit_status"
}

var (
	errUsage       = errors.New("usage")
	errUnavailable = errors.New("sandboxes cannot run on this host")
	// errNoInput: an input file named on the command line cannot be read.
	errNoInput = errors.New("cannot read input")
	// errNoDir: a directory named on the command line (--cache,
	// --state-dir) does not exist; only the defaults are made.
	errNoDir = errors.New("no such directory")
)
