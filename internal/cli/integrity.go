package cli

import (
	"fmt"

	"github.com/minisandbox/msb/internal/api"
)

// detailOf is a result's detail for the eval table (firstLine of it), or,
// for a patch found tampered whose verdict --integrity warn kept, the
// flag and the first reason; else, for a result whose repeated runs
// flipped (--repeat), the flaky mark.
func detailOf(r api.EvalResult) string {
	if d := firstLine(r.Detail); d != "" || r.Report.Integrity != api.IntegrityTampered {
		if d == "" && r.Flaky {
			d = fmt.Sprintf("flaky: %d tests flipped in %d runs", len(r.Report.FlakyTests), r.Runs)
		}
		return d
	}
	reason := ""
	if len(r.Report.IntegrityReasons) > 0 {
		reason = ": " + r.Report.IntegrityReasons[0]
	}
	return firstLine("integrity: tampered (warn)" + reason)
}
