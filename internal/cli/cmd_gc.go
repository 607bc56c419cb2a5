package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func newGCCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "gc",
		Short:   "Remove what killed msb processes left behind: sandbox processes, cgroups, state dirs",
		Example: "  msb gc",
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
			return nil
		},
	}
}
