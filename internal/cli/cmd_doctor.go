package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/engine/host"
)

func newDoctorCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "doctor",
		Short:   "Check that this host can run sandboxes, in which mode, and what is missing",
		Example: "  msb doctor\n  msb doctor --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.openHost()
			if err != nil {
				return err
			}
			defer h.Close()
			// Its test sandbox makes root mode's disk pool; a check leaves
			// the host as it found it, so a pool it made goes again.
			if !h.HasDiskPool() {
				defer func() {
					if _, err := h.ReleaseDiskPool(); err != nil {
						fmt.Fprintf(os.Stderr, "msb doctor: the disk pool its test sandbox made stays: %v (msb gc --disk-pool removes it)\n", err)
					}
				}()
			}
			d := h.Doctor(cmd.Context())
			if g.json {
				if err := printJSON(d.DoctorReport); err != nil {
					return err
				}
			} else {
				printDoctor(os.Stdout, d)
			}
			if !d.OK {
				return fmt.Errorf("%w: see the MISSING checks", errUnavailable)
			}
			return nil
		},
	}
}

// printDoctor writes the checks for a person: one entry per check, its
// status first, its detail and fix wrapped to fit 100 columns.
func printDoctor(w io.Writer, d host.Diagnosis) {
	fmt.Fprintf(w, "mode:         %s\nstate dir:    %s\nsandbox init: %s\n\n", d.Mode, d.StateDir, d.Init)
	const indent = "           "
	for _, c := range d.Checks {
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
