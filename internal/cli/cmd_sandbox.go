package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/client"
)

func newSandboxCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Sandboxes of the daemon (msb serve): create, ls, rm",
	}
	cmd.AddCommand(newSandboxCreateCmd(g), newSandboxLsCmd(g), newSandboxRmCmd(g))
	return cmd
}

func newSandboxCreateCmd(g *globals) *cobra.Command {
	var d daemonFlags
	var instance, memory, disk, network, workdir, image string
	var labels, layers, env []string
	var lifetime, idle, wait time.Duration
	var hostBase bool
	var count, warm int
	cmd := &cobra.Command{
		Use:   "create [--instance ID | --image REF] [--label k=v] [--layer REF] [--count N] [--warm K]",
		Short: "Create sandboxes in the daemon and print their ids, one a line",
		Example: `  msb sandbox create --label job=demo
  msb sandbox create --instance demo__calc-1 --lifetime 1h --idle-timeout 10m --wait 30s
  msb sandbox create --instance demo__calc-1 --count 8 --warm 8 --label group=g1
  msb sandbox create --image debian:bookworm -e LANG=C.UTF-8`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 1 || warm < 0 {
				return fmt.Errorf("%w: --count must be at least 1 and --warm not negative", errUsage)
			}
			req := api.CreateSandboxRequest{InstanceID: instance, Layers: layers, HostBase: hostBase, Image: image, Workdir: workdir, Env: env, Network: network,
				LifetimeNs: int64(lifetime), IdleTimeoutNs: int64(idle), AdmissionWaitNs: int64(wait), Warm: warm}
			var err error
			if req.Labels, err = keyValues(labels, "--label"); err != nil {
				return err
			}
			if req.Limits.MemoryBytes, err = sizeFlag(cmd.Flags(), "memory", memory); err != nil {
				return err
			}
			if req.Limits.DiskBytes, err = sizeFlag(cmd.Flags(), "disk", disk); err != nil {
				return err
			}
			c, err := d.client(g)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("count") {
				return createBatch(cmd, g, c, count, req)
			}
			info, err := c.CreateSandbox(cmd.Context(), req)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(info)
			}
			fmt.Println(info.ID)
			return nil
		},
	}
	d.register(cmd.Flags())
	fs := cmd.Flags()
	fs.StringVar(&instance, "instance", "", "a task sandbox for this instance (known to the daemon), at its starting state in /testbed")
	fs.StringArrayVar(&layers, "layer", nil, "a cache layer (ref or digest), bottom first, for a raw sandbox (repeatable)")
	fs.BoolVar(&hostBase, "host-base", false, "a raw sandbox on the host's system directories (the default without --layer)")
	fs.StringVar(&image, "image", "", "a raw sandbox on an image, Debian base or snapshot the daemon's cache holds (a reference, image/<ref>, sha256:<digest>, debian/<name>, snapshot/<name>): its env first, its workdir by default, its user")
	fs.StringArrayVar(&labels, "label", nil, "label key=value (repeatable)")
	fs.StringArrayVarP(&env, "env", "e", nil, "environment variable NAME=value of a raw sandbox (repeatable)")
	fs.StringVarP(&workdir, "workdir", "w", "", "working directory of a raw sandbox")
	fs.StringVar(&network, "network", "", "none (default) or host")
	fs.StringVar(&memory, "memory", "", "memory limit, e.g. 1G (default: the daemon's)")
	fs.StringVar(&disk, "disk", "", "disk limit, e.g. 10G (default: the daemon's)")
	fs.DurationVar(&lifetime, "lifetime", 0, "close the sandbox after this long (default: the daemon's)")
	fs.DurationVar(&idle, "idle-timeout", 0, "close the sandbox after this long unused (default: the daemon's)")
	fs.DurationVar(&wait, "wait", 0, "wait up to this long for room instead of failing when the daemon is full")
	fs.IntVarP(&count, "count", "n", 1, "create this many sandboxes like this one, all or none (--json: a list)")
	fs.IntVar(&warm, "warm", 0, "keep this many sandboxes of this instance or image started ahead in the daemon for the next creates (bounded by its --spares)")
	return cmd
}

// createBatch creates count sandboxes of req in one call and prints them:
// their ids one a line, or a SandboxList with --json.
func createBatch(cmd *cobra.Command, g *globals, c *client.Client, count int, req api.CreateSandboxRequest) error {
	list, err := c.CreateSandboxes(cmd.Context(), count, req)
	if err != nil {
		return err
	}
	if g.json {
		return printJSON(api.SandboxList{Sandboxes: list})
	}
	for _, s := range list {
		fmt.Println(s.ID)
	}
	return nil
}

func newSandboxLsCmd(g *globals) *cobra.Command {
	var d daemonFlags
	var labels []string
	cmd := &cobra.Command{
		Use:     "ls [--label k=v]",
		Short:   "List the daemon's live sandboxes",
		Example: "  msb sandbox ls\n  msb sandbox ls --label job=demo --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			match, err := keyValues(labels, "--label")
			if err != nil {
				return err
			}
			c, err := d.client(g)
			if err != nil {
				return err
			}
			list, err := c.Sandboxes(cmd.Context(), match)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(api.SandboxList{Sandboxes: list})
			}
			t := newTable("ID", "INSTANCE", "LABELS", "SESSIONS", "CREATED", "EXPIRES", "LAST ACTIVE")
			for _, s := range list {
				var ls []string
				for k, v := range s.Labels {
					ls = append(ls, k+"="+v)
				}
				t.row(s.ID, or(s.InstanceID, "-"), or(strings.Join(ls, ","), "-"), or(strings.Join(s.Sessions, ","), "-"), s.CreatedAt, or(s.ExpiresAt, "-"), s.LastActiveAt)
			}
			return t.flush()
		},
	}
	d.register(cmd.Flags())
	cmd.Flags().StringArrayVar(&labels, "label", nil, "only sandboxes with this label key=value (repeatable)")
	return cmd
}

func newSandboxRmCmd(g *globals) *cobra.Command {
	var d daemonFlags
	cmd := &cobra.Command{
		Use:     "rm ID...",
		Short:   "Close sandboxes of the daemon: kill everything in them and remove them",
		Example: "  msb sandbox rm 3f2a9c0d1e2b4f56",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := d.client(g)
			if err != nil {
				return err
			}
			var out []api.SandboxInfo
			for _, id := range args {
				info, err := c.DeleteSandbox(cmd.Context(), id)
				if err != nil {
					return err
				}
				out = append(out, info)
				if !g.json {
					fmt.Println(id)
				}
			}
			if g.json {
				return printJSON(api.SandboxList{Sandboxes: out})
			}
			return nil
		},
	}
	d.register(cmd.Flags())
	return cmd
}
