package cli

import "github.com/minisandbox/msb/internal/api"

// detailOf is a result's detail for the eval table (firstLine of it), or,
// for a patch found tampered whose verdict --integrity warn kept, the
// flag and the first reason.
func detailOf(r api.EvalResult) string {
	if d := firstLine(r.Detail); d != "" || r.Report.Integrity != api.IntegrityTampered {
		return d
	}
	reason := ""
	if len(r.Report.IntegrityReasons) > 0 {
		reason = ": " + r.Report.IntegrityReasons[0]
	}
	return firstLine("integrity: tampered (warn)" + reason)
}
