package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/api"
)

// execFlags are msb exec's and msb session exec's.
type execFlags struct {
	daemonFlags
	cwd      string
	env      []string
	timeout  time.Duration
	stdin    bool
	separate bool
}

func (f *execFlags) register(cmd *cobra.Command, oneShot bool) {
	fs := cmd.Flags()
	f.daemonFlags.register(fs)
	fs.DurationVar(&f.timeout, "timeout", 0, "interrupt the command after this long (default none)")
	fs.BoolVar(&f.separate, "separate-stderr", false, "with --json: stderr apart from stdout (the default merges them)")
	if oneShot {
		fs.StringVarP(&f.cwd, "workdir", "w", "", "working directory of the command")
		fs.StringArrayVarP(&f.env, "env", "e", nil, "environment variable NAME=value (repeatable)")
		fs.BoolVarP(&f.stdin, "interactive", "i", false, "send this process's stdin to the command")
	}
}

// commandText is the bash source of CMD...: one argument as it is (shell
// text), several quoted as a command line.
func commandText(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func newExecCmd(g *globals) *cobra.Command {
	var f execFlags
	cmd := &cobra.Command{
		Use:   "exec ID -- CMD...",
		Short: "Run a command in a sandbox of the daemon (a fresh bash), streaming its output; exit with its code",
		Example: `  msb exec 3f2a9c0d1e2b4f56 -- ls -la /testbed
  msb exec 3f2a9c0d1e2b4f56 -- 'cd /testbed && git status'
  echo data | msb exec -i 3f2a9c0d1e2b4f56 -- wc -c`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client(g)
			if err != nil {
				return err
			}
			req := api.ExecRequest{Command: commandText(args[1:]), Cwd: f.cwd, Env: f.env, TimeoutNs: int64(f.timeout), SeparateStderr: !g.json || f.separate}
			if f.stdin {
				b, err := io.ReadAll(os.Stdin)
				if err != nil {
					return err
				}
				req.Stdin = string(b)
			}
			var res api.ExecResult
			if g.json {
				res, err = c.Exec(cmd.Context(), args[0], req)
			} else {
				res, err = c.ExecStream(cmd.Context(), args[0], req, func(ev api.ExecEvent) {
					if ev.Type == api.EventStderr {
						fmt.Fprint(os.Stderr, ev.Data)
					} else {
						fmt.Fprint(os.Stdout, ev.Data)
					}
				})
			}
			if err != nil {
				return err
			}
			return execExit(g, res)
		},
	}
	f.register(cmd, true)
	return cmd
}

// execExit prints a result (--json) and exits with the command's code.
func execExit(g *globals, res api.ExecResult) error {
	if g.json {
		if err := printJSON(res); err != nil {
			return err
		}
	}
	msg := ""
	if res.TimedOut {
		msg = "the command timed out and was interrupted"
	}
	if res.ExitCode != 0 || msg != "" {
		return &exitError{code: res.ExitCode, msg: msg}
	}
	return nil
}
