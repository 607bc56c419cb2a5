package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/bench"
	"github.com/minisandbox/msb/internal/sandbox"
)

// errE2BFailed is an E2B benchmark that stopped on a failure, or whose
// load run lost or mixed commands (its report says which).
var errE2BFailed = errors.New("the E2B benchmark failed")

// newBenchE2BCmd is `msb bench e2b`: the E2B front end through the e2b
// Python SDK, beside the native API on the same work.
func newBenchE2BCmd(g Host) *cobra.Command {
	o := bench.E2BOptions{}
	cmd := &cobra.Command{
		Use:   "e2b",
		Short: "The E2B front end through the e2b Python SDK: create → first command, a command's round trip, the SDK's own floor, a load of async sandboxes",
		Long: `Starts msb serve --e2b (the msb binary next to msb-bench, else on PATH) on a cache of its own and
drives it with the e2b Python SDK (--python: an interpreter that has it, as .venv-test's): rounds of
Sandbox.create() → commands.run("true") answered beside the native create → exec, the order
alternating, each create --gap after the last command; commands of true in one sandbox per path,
interleaved (E2B's bash -l -c true, the native exec of true, of bash -l -c true and of the script
the front end runs for E2B's, the same work); the same SDK
calls against a stub that answers at once (what the SDK costs alone); and --sandboxes async
sandboxes of --commands commands each, counting the commands lost or given another's output;
--fork-rounds forks of --forks children of one parent, to a first command answered in every child,
through the async SDK (20 a call, the calls concurrent) beside the native fork.
Prints p50 and p90 and the load average (before, after, peak). docs/e2b.md, "Latency", has the
method and results.`,
		Example: "  msb bench e2b --python .venv-test/bin/python\n" +
			"  msb bench e2b --python .venv-test/bin/python --rounds 10 --rtt 100 --sandboxes 0 --json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			exe, err := msbExecutable()
			if err != nil {
				return err
			}
			dir, err := os.MkdirTemp(g.Env().TmpDir, "msb-bench-e2b-")
			if err != nil {
				return err
			}
			defer sandbox.RemoveAll(dir)
			o.Exe, o.StateDir = exe, g.StateDir()
			o.ServeArgs = []string{"--cache", filepath.Join(dir, "cache")}
			o.Progress = func(line string) { fmt.Fprintln(os.Stderr, "msb bench:", line) }
			rep := bench.E2B(cmd.Context(), o)
			if g.JSON() {
				if err := printJSON(rep); err != nil {
					return err
				}
			} else {
				rep.WriteText(os.Stdout)
			}
			if rep.Failed != "" {
				return fmt.Errorf("%w: %s", errE2BFailed, rep.Failed)
			}
			if l := rep.Load; l != nil && l.Lost+l.Mixed > 0 {
				return fmt.Errorf("%w: %d commands lost, %d mixed", errE2BFailed, l.Lost, l.Mixed)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Python, "python", "python3", "Python interpreter with the e2b SDK (internal/server/testdata/requirements.txt)")
	f.IntVar(&o.Rounds, "rounds", 30, "create → first command rounds per path")
	f.IntVar(&o.RTT, "rtt", 200, "commands of true per path in one sandbox")
	f.DurationVar(&o.Gap, "gap", 300*time.Millisecond, "the client's untimed wait before each create (a trainer's work between episodes; 0: back to back)")
	f.IntVar(&o.Sandboxes, "sandboxes", 200, "sandboxes of the async load run (0: none)")
	f.IntVar(&o.Commands, "commands", 200, "commands per sandbox in the load run")
	f.IntVar(&o.Concurrency, "concurrency", 32, "SDK calls in flight at once in the load run")
	f.IntVar(&o.Forks, "forks", 32, "children of each fork → first command round (0: no fork)")
	f.IntVar(&o.ForkRounds, "fork-rounds", 10, "fork rounds per path")
	return cmd
}
