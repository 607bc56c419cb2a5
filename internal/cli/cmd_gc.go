package cli

import (
	"encoding/json"
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
			rt, err := g.runtime()
			if err != nil {
				return err
			}
			defer rt.Close()
			rep := rt.GC()
			if g.json {
				return json.NewEncoder(os.Stdout).Encode(rep)
			}
			fmt.Printf("removed %d sandbox state dirs, killed %d sandbox inits, removed %d cgroups\n",
				len(rep.Sandboxes), len(rep.Processes), len(rep.Cgroups))
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
