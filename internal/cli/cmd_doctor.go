package cli

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/sandbox"
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
				if err := printJSON(doctorReport(rt, checks, !failed)); err != nil {
					return err
				}
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

// doctorReport is the wire form of msb doctor's findings.
func doctorReport(rt *sandbox.Runtime, checks []sandbox.Check, ok bool) api.DoctorReport {
	en := rt.Enforcement()
	r := api.DoctorReport{Mode: rt.Mode(), StateDir: rt.StateDir(), OK: ok, Checks: []api.Check{},
		Enforcement: api.Enforcement{Memory: en.Memory, Pids: en.Pids, CPU: en.CPU, Tmp: en.Tmp, Disk: en.Disk, HostFiles: en.HostFiles}}
	for _, c := range checks {
		r.Checks = append(r.Checks, api.Check{Name: c.Name, OK: c.OK, Detail: c.Detail, Fix: c.Fix, Required: c.Required})
	}
	return r
}
