package grading

import (
	"strings"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/grading/integrity"
)

// checkIntegrity is the stage every grader's verdict passes through: the
// model patch is checked against the test patch (package integrity) and
// the report says ok or tampered, with the reasons. Under IntegrityFail
// (the default) a tampered patch's verdict is unresolved, its reward 0,
// and its detail the reasons; under IntegrityWarn the verdict stays the
// harness's. An evaluation without a patch is not checked.
func checkIntegrity(e Evaluation, v Verdict) Verdict {
	if e.Patch == nil || strings.TrimSpace(*e.Patch) == "" {
		return v
	}
	res := integrity.Check(*e.Patch, e.TestPatch)
	v.Report.Integrity, v.Report.IntegrityReasons = res.Verdict, res.Reasons()
	if res.Verdict != api.IntegrityTampered || e.Integrity == api.IntegrityWarn || !v.Outcome.IsVerdict() {
		return v
	}
	v.Voided = true
	v.Outcome, v.Resolution, v.Report.Resolved = api.OutcomeUnresolved, api.ResolvedNo, false
	v.Detail = strings.TrimSpace("integrity: tampered: " + strings.Join(res.Reasons(), "; ") + "\n" + v.Detail)
	return v
}

// Reward is the verdict's reward in [0, 1] (RewardOf): 0 without tests
// status or when the integrity check voided it.
func (v Verdict) Reward(mode api.RewardMode) float64 {
	if v.Voided || v.Report.TestsStatus == nil {
		return 0
	}
	return RewardOf(*v.Report.TestsStatus, mode)
}
