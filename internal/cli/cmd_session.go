package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/api"
)

func newSessionCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Persistent shells in a sandbox of the daemon: open, exec, interrupt, close, ls",
	}
	var d daemonFlags
	open := &cobra.Command{
		Use:     "open ID NAME",
		Short:   "Start a persistent bash (cwd, variables and functions persist between commands)",
		Example: "  msb session open 3f2a9c0d1e2b4f56 main",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := d.client(g)
			if err != nil {
				return err
			}
			if err := c.OpenSession(cmd.Context(), args[0], api.SessionRequest{Name: args[1]}); err != nil {
				return err
			}
			return printOr(g, api.SessionInfo{Name: args[1]}, args[1])
		},
	}
	d.register(open.Flags())
	var f execFlags
	exec := &cobra.Command{
		Use:     "exec ID NAME -- CMD...",
		Short:   "Run a command in the session; exit with its code",
		Example: "  msb session exec 3f2a9c0d1e2b4f56 main -- 'cd /tmp && export X=1'\n  msb session exec 3f2a9c0d1e2b4f56 main -- 'echo $PWD $X'",
		Args:    cobra.MinimumNArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client(g)
			if err != nil {
				return err
			}
			res, err := c.Exec(cmd.Context(), args[0], api.ExecRequest{Session: args[1], Command: commandText(args[2:]), TimeoutNs: int64(f.timeout), SeparateStderr: f.separate})
			if err != nil {
				return err
			}
			if !g.json {
				fmt.Print(res.Stdout)
			}
			return execExit(g, res)
		},
	}
	f.register(exec, false)
	var di daemonFlags
	interrupt := &cobra.Command{
		Use:     "interrupt ID NAME",
		Short:   "Ctrl-C for the command running in the session",
		Example: "  msb session interrupt 3f2a9c0d1e2b4f56 main",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := di.client(g)
			if err != nil {
				return err
			}
			ok, err := c.InterruptSession(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			return printOr(g, api.InterruptResult{Interrupted: ok}, map[bool]string{true: "interrupted", false: "nothing was running"}[ok])
		},
	}
	di.register(interrupt.Flags())
	var dc daemonFlags
	closeCmd := &cobra.Command{
		Use:     "close ID NAME",
		Short:   "End the session and everything it started",
		Example: "  msb session close 3f2a9c0d1e2b4f56 main",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dc.client(g)
			if err != nil {
				return err
			}
			if err := c.CloseSession(cmd.Context(), args[0], args[1]); err != nil {
				return err
			}
			return printOr(g, api.SessionInfo{Name: args[1]}, args[1])
		},
	}
	dc.register(closeCmd.Flags())
	var dl daemonFlags
	ls := &cobra.Command{
		Use:     "ls ID",
		Short:   "The sandbox's sessions",
		Example: "  msb session ls 3f2a9c0d1e2b4f56",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dl.client(g)
			if err != nil {
				return err
			}
			names, err := c.Sessions(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printOr(g, api.SessionList{Sessions: names}, strings.Join(names, "\n"))
		},
	}
	dl.register(ls.Flags())
	cmd.AddCommand(open, exec, interrupt, closeCmd, ls)
	return cmd
}

// printOr prints v as JSON with --json, else text (when not empty).
func printOr(g *globals, v any, text string) error {
	if g.json {
		return printJSON(v)
	}
	if text != "" {
		fmt.Println(text)
	}
	return nil
}
