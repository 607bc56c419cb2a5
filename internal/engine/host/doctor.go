package host

import (
	"context"

	"github.com/minisandbox/msb/internal/api"
)

// Diagnosis is what Doctor found: the report msb doctor --json prints,
// and the sandbox init executable the runtime starts.
type Diagnosis struct {
	api.DoctorReport
	Init string
}

// Doctor checks the kernel features sandboxes need in the Host's mode,
// then creates a sandbox and runs a command in it. The report is OK when
// every required check passed; a check that is not required and failed
// is a limit that does not hold.
func (h *Host) Doctor(ctx context.Context) Diagnosis {
	checks := h.rt.Doctor(ctx)
	en := h.rt.Enforcement()
	r := api.DoctorReport{Mode: h.rt.Mode(), StateDir: h.rt.StateDir(), OK: true, Checks: []api.Check{},
		Enforcement: api.Enforcement{Memory: en.Memory, Pids: en.Pids, CPU: en.CPU, Tmp: en.Tmp, Disk: en.Disk, HostFiles: en.HostFiles}}
	for _, c := range checks {
		r.OK = r.OK && (c.OK || !c.Required)
		r.Checks = append(r.Checks, api.Check{Name: c.Name, OK: c.OK, Detail: c.Detail, Fix: c.Fix, Required: c.Required})
	}
	return Diagnosis{DoctorReport: r, Init: h.rt.Exe()}
}
