package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/engine/host"
)

func newGCCmd(g *globals) *cobra.Command {
	var diskPool bool
	cmd := &cobra.Command{
		Use:     "gc",
		Short:   "Remove what killed msb processes left behind: sandbox processes, cgroups, state dirs",
		Example: "  msb gc\n  msb gc --disk-pool   # also unmount and delete root mode's disk pool when no sandbox uses it",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := os.Stat(g.settings.StateDir); err != nil {
				if !g.settings.StateDirGiven && os.IsNotExist(err) {
					fmt.Printf("nothing to collect: no state dir %s (no sandbox ran here)\n", g.settings.StateDir)
					return nil
				}
				return fmt.Errorf("%w: state dir: %w", errUsage, err)
			}
			h, err := g.openHost()
			if err != nil {
				return err
			}
			defer h.Close()
			rep := h.GC()
			if g.json {
				if err := printJSON(rep); err != nil {
					return err
				}
			} else {
				fmt.Printf("removed %d sandbox state dirs, killed %d sandbox inits, removed %d cgroups, %d disk volumes\n",
					len(rep.Sandboxes), len(rep.Processes), len(rep.Cgroups), len(rep.Volumes))
			}
			for _, e := range rep.Errors {
				fmt.Fprintln(os.Stderr, "msb gc:", e)
			}
			if len(rep.Errors) > 0 {
				return fmt.Errorf("gc left %d things behind", len(rep.Errors))
			}
			if diskPool {
				return releaseDiskPool(h)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&diskPool, "disk-pool", false, "also unmount and delete root mode's disk pool (kept between runs) when no running sandbox has a volume in it")
	return cmd
}

// releaseDiskPool removes the host's disk pool and says so on stderr.
func releaseDiskPool(h *host.Host) error {
	released, err := h.ReleaseDiskPool()
	if err != nil {
		return err
	}
	if released {
		fmt.Fprintln(os.Stderr, "msb gc: disk pool unmounted and deleted")
	}
	return nil
}
