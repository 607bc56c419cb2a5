package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newDoctorCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "doctor",
		Short:   "Check that this host can run sandboxes, in which mode, and what is missing",
		Example: "  msb doctor\n  msb doctor --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rt, err := g.runtime()
			if err != nil {
				return err
			}
			defer rt.Close()
			checks := rt.Doctor(cmd.Context())
			failed := false
			for _, c := range checks {
				failed = failed || (c.Required && !c.OK)
			}
			if g.json {
				json.NewEncoder(os.Stdout).Encode(map[string]any{"mode": rt.Mode(), "enforcement": rt.Enforcement(), "checks": checks, "ok": !failed})
			} else {
				fmt.Printf("mode: %s (state dir %s, sandbox init %s)\n\n", rt.Mode(), rt.StateDir(), rt.Exe())
				tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "CHECK\tSTATUS\tDETAIL")
				for _, c := range checks {
					status := "ok"
					if !c.OK {
						status = "MISSING"
						if !c.Required {
							status = "degraded"
						}
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, status, c.Detail)
					if !c.OK && c.Fix != "" {
						fmt.Fprintf(tw, "\t\tfix: %s\n", c.Fix)
					}
				}
				tw.Flush()
			}
			if failed {
				return fmt.Errorf("%w: see the MISSING checks", errUnavailable)
			}
			return nil
		},
	}
}
