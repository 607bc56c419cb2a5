package cli

import (
	"fmt"
	"io"
	"os"

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
				printDoctor(os.Stdout, rt, checks)
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

// printDoctor writes the checks for a person: one entry per check, its
// status first, its detail and fix wrapped to fit 100 columns.
func printDoctor(w io.Writer, rt *sandbox.Runtime, checks []sandbox.Check) {
	fmt.Fprintf(w, "mode:         %s\nstate dir:    %s\nsandbox init: %s\n\n", rt.Mode(), rt.StateDir(), rt.Exe())
	const indent = "           "
	for _, c := range checks {
		status := "ok"
		if !c.OK {
			status = "MISSING"
			if !c.Required {
				status = "degraded"
			}
		}
		lines := wrapText(c.Name+": "+c.Detail, outputWidth-len(indent))
		if !c.OK && c.Fix != "" {
			lines = append(lines, wrapText("fix: "+c.Fix, outputWidth-len(indent))...)
		}
		for i, l := range lines {
			if i == 0 {
				fmt.Fprintf(w, "%-*s%s\n", len(indent), status, l)
				continue
			}
			fmt.Fprintf(w, "%s%s\n", indent, l)
		}
	}
}
