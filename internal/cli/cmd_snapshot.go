package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/api"
)

// newSnapshotCmds are the verbs of snapshots, forks and rollbacks of the
// daemon's sandboxes: msb snapshot create|ls|rm, msb fork, msb rollback.
func newSnapshotCmds(g *globals) []*cobra.Command {
	snap := &cobra.Command{
		Use:   "snapshot",
		Short: "Snapshots of the daemon's sandboxes (what a sandbox wrote, as a layer): create, ls, rm",
	}
	snap.AddCommand(newSnapshotCreateCmd(g), newSnapshotLsCmd(g), newSnapshotRmCmd(g))
	return []*cobra.Command{snap, newForkCmd(g), newRollbackCmd(g)}
}

func newSnapshotCreateCmd(g *globals) *cobra.Command {
	var d daemonFlags
	var processes bool
	cmd := &cobra.Command{
		Use:   "create ID [NAME] [--processes]",
		Short: "Snapshot a sandbox (frozen while its writes are copied) and print the snapshot's name, or its layer without one",
		Long: `Snapshot a sandbox (frozen while its writes are copied) and print the snapshot's name, or its
layer without one. With --processes its running processes are dumped with CRIU in the same freeze
and kept with the snapshot (root mode, criu 4.x on the daemon's host): msb fork --snapshot NAME
--processes goes on with them, also once the sandbox is closed.`,
		Example: `  msb snapshot create 3f2a9c0d1e2b4f56 step-3
  msb snapshot create 3f2a9c0d1e2b4f56 paused --processes
  msb snapshot create 3f2a9c0d1e2b4f56 --json`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.SnapshotRequest{}
			if len(args) == 2 {
				req.Name = args[1]
			}
			if processes {
				req.Processes = api.ForkProcessesAll
			}
			c, err := d.client(g)
			if err != nil {
				return err
			}
			info, err := c.Snapshot(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			return printOr(g, info, or(info.Name, info.Layer))
		},
	}
	d.register(cmd.Flags())
	cmd.Flags().BoolVar(&processes, "processes", false, "also dump the sandbox's running processes and keep them with the snapshot (CRIU: root mode, criu 4.x)")
	return cmd
}

func newSnapshotLsCmd(g *globals) *cobra.Command {
	var d daemonFlags
	cmd := &cobra.Command{
		Use:     "ls",
		Short:   "List the daemon's named snapshots",
		Example: "  msb snapshot ls\n  msb snapshot ls --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := d.client(g)
			if err != nil {
				return err
			}
			list, err := c.Snapshots(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(api.SnapshotList{Snapshots: list})
			}
			t := newTable("NAME", "SANDBOX", "INSTANCE", "SIZE", "FILES", "SESSIONS", "CREATED")
			for _, s := range list {
				var names []string
				for _, ss := range s.Sessions {
					names = append(names, ss.Name)
				}
				t.row(s.Name, s.Sandbox, or(s.InstanceID, "-"), fmtBytes(s.Bytes), strconv.Itoa(s.Files), or(strings.Join(names, ","), "-"), s.CreatedAt)
			}
			return t.flush()
		},
	}
	d.register(cmd.Flags())
	return cmd
}

func newSnapshotRmCmd(g *globals) *cobra.Command {
	var d daemonFlags
	cmd := &cobra.Command{
		Use:     "rm NAME...",
		Short:   "Delete named snapshots (a layer a sandbox still uses stays until msb gc after it)",
		Example: "  msb snapshot rm step-3",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := d.client(g)
			if err != nil {
				return err
			}
			for _, name := range args {
				if err := c.DeleteSnapshot(cmd.Context(), name); err != nil {
					return err
				}
				if !g.json {
					fmt.Println(name)
				}
			}
			return nil
		},
	}
	d.register(cmd.Flags())
	return cmd
}

func newForkCmd(g *globals) *cobra.Command {
	var d daemonFlags
	var count, warm int
	var snapshot string
	var labels []string
	var processes bool
	cmd := &cobra.Command{
		Use:   "fork [ID] [--count N] [--processes] [--snapshot NAME [--warm K]]",
		Short: "Start new sandboxes from a sandbox's state now, or from a snapshot, and print their ids",
		Long: `Start new sandboxes from a sandbox's state now, or from a named snapshot (of it, or without
ID of any sandbox, also one closed since), and print their ids, one a line. Each child has its own
writable layer and the source's limits, labels and network; its sessions restart in the cwd and
environment they had. Running processes are not carried unless --processes asks (root mode, criu
4.x on the daemon's host): each child then goes on with every process of the sandbox, its sessions'
shells among them, restored from one dump taken in the same freeze as the snapshot of its files, or,
with --snapshot, from the dump kept with a snapshot taken with --processes; a fork that cannot carry
them fails saying why.`,
		Example: `  msb fork 3f2a9c0d1e2b4f56 --count 8 --label group=g1
  msb fork 3f2a9c0d1e2b4f56 --count 2 --processes
  msb fork --snapshot step-3 --json
  msb fork --snapshot step-3 --count 4 --warm 8`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && snapshot == "" {
				return fmt.Errorf("%w: give a sandbox ID or --snapshot (see msb fork --help)", errUsage)
			}
			if warm < 0 || (warm > 0 && len(args) > 0) {
				return fmt.Errorf("%w: --warm is a number of children of --snapshot alone (no sandbox ID) to keep started ahead", errUsage)
			}
			req := api.ForkRequest{Count: count, Snapshot: snapshot, Warm: warm}
			if processes {
				req.Processes = api.ForkProcessesAll
			}
			var err error
			if req.Labels, err = keyValues(labels, "--label"); err != nil {
				return err
			}
			c, err := d.client(g)
			if err != nil {
				return err
			}
			var children []api.SandboxInfo
			if len(args) == 0 {
				children, err = c.ForkSnapshot(cmd.Context(), snapshot, req)
			} else {
				children, err = c.Fork(cmd.Context(), args[0], req)
			}
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(api.SandboxList{Sandboxes: children})
			}
			for _, ch := range children {
				fmt.Println(ch.ID)
			}
			return nil
		},
	}
	d.register(cmd.Flags())
	fs := cmd.Flags()
	fs.IntVarP(&count, "count", "n", 1, "how many children")
	fs.StringVar(&snapshot, "snapshot", "", "fork from this snapshot instead of the sandbox's state now")
	fs.IntVar(&warm, "warm", 0, "with --snapshot alone: keep this many children of the snapshot started ahead in the daemon for the next forks (bounded by its --spares)")
	fs.StringArrayVar(&labels, "label", nil, "label key=value added to the inherited ones (repeatable)")
	fs.BoolVar(&processes, "processes", false, "carry the running processes into each child: the sandbox's now, or those kept with --snapshot (CRIU: root mode, criu 4.x)")
	return cmd
}

func newRollbackCmd(g *globals) *cobra.Command {
	var d daemonFlags
	var snapshot string
	cmd := &cobra.Command{
		Use:   "rollback ID [--snapshot NAME]",
		Short: "Reset a sandbox in place to a snapshot, or to its state at creation",
		Long: `Reset a sandbox in place (same id) to a named snapshot, or without one to its state at
creation: everything running in it is killed, its writes since are dropped, and its sessions restart
in the snapshot's cwd and environment.`,
		Example: "  msb rollback 3f2a9c0d1e2b4f56 --snapshot step-3\n  msb rollback 3f2a9c0d1e2b4f56",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := d.client(g)
			if err != nil {
				return err
			}
			info, err := c.Rollback(cmd.Context(), args[0], api.RollbackRequest{Snapshot: snapshot})
			if err != nil {
				return err
			}
			return printOr(g, info, info.ID)
		},
	}
	d.register(cmd.Flags())
	cmd.Flags().StringVar(&snapshot, "snapshot", "", "the snapshot to return to (default: the state at creation)")
	return cmd
}
