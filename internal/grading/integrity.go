package grading

import (
	"strings"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/grading/integrity"
	"github.com/minisandbox/msb/internal/patch"
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
	reasons := integrity.CheckInstance(*e.Patch, integrity.Instance{TestPatch: e.TestPatch, TestCommand: e.TestCommand, Base: baseOf(e)}).Reasons()
	if e.Canary.Note != "" {
		v.Report.IntegrityNotes = append(v.Report.IntegrityNotes, e.Canary.Note)
	}
	v.Report.IntegrityNotes = append(v.Report.IntegrityNotes, e.CanaryNotes...)
	if v.Outcome.IsVerdict() && len(v.Statuses) > 0 && e.Parse != nil {
		canary, note := canaryReasons(e)
		if note != "" {
			v.Report.IntegrityNotes = append(v.Report.IntegrityNotes, note)
		}
		reasons = append(reasons, canary...)
		reasons = append(reasons, channelReasons(e, v)...)
	}
	v.Report.Integrity, v.Report.IntegrityReasons = api.IntegrityOK, reasons
	if len(reasons) > 0 {
		v.Report.Integrity = api.IntegrityTampered
	}
	if len(reasons) == 0 || e.Integrity == api.IntegrityWarn || !v.Outcome.IsVerdict() {
		return v
	}
	v.Voided = true
	v.Outcome, v.Resolution, v.Report.Resolved = api.OutcomeUnresolved, api.ResolvedNo, false
	v.Detail = strings.TrimSpace("integrity: tampered: " + strings.Join(reasons, "; ") + "\n" + v.Detail)
	return v
}

// baseOf reads e's base files (nil when the evaluation read none).
func baseOf(e Evaluation) func(string) (string, bool) {
	if e.BaseFiles == nil {
		return nil
	}
	return func(p string) (string, bool) {
		text, ok := e.BaseFiles[p]
		return text, ok
	}
}

// canaryReasons parses the canary run's output with the instance's parser
// and reads what the canary's runner shows (integrity.Canary.Statuses: a
// runner's own report, Gradle's or Automake's .trs files, against which
// the parsed log is checked too: integrity.Canary.CrossCheck) and says
// what it shows (integrity.Canary.Judge). It is read only when
// the harness's run gave a verdict and reported tests: a run that
// reported none (no runner, a patch that breaks collection) is unresolved
// anyway, and its canary run fails for the same reason. A language canary
// the repository could not take reports no test and returns why as a note;
// a CTest canary whose program could not link every static library whole
// says how it was linked (integrity.Canary.LinkNote).
func canaryReasons(e Evaluation) (reasons []string, note string) {
	if !e.Canary.Active() {
		return nil, ""
	}
	out, ok := e.Canary.Output(e.Log)
	parsed := map[string]string{}
	for id, st := range e.Parse(out) {
		parsed[id] = string(st)
	}
	statuses, own := e.Canary.Statuses(out, parsed)
	if n := e.Canary.Skipped(out); ok && n != "" && len(statuses) == 0 {
		return nil, n
	}
	if !ok {
		return e.Canary.Judge(map[string]string{}, false), ""
	}
	reasons = e.Canary.Judge(statuses, true)
	if own {
		reasons = append(reasons, e.Canary.CrossCheck(statuses, parsed)...)
	}
	return reasons, e.Canary.LinkNote(out)
}

// channelReasons checks the statuses the harness's parser read (v's) of
// the instance's tests against pytest's own report, read by the same
// parser (integrity.Log, integrity.Channel.Judge).
func channelReasons(e Evaluation, v Verdict) []string {
	if !e.Channel.Active() {
		return nil
	}
	logged := make(map[string]string, len(v.Statuses))
	for id, st := range v.Statuses {
		logged[id] = string(st)
	}
	parsed := map[string]string{}
	for id, st := range e.Parse(integrity.Log(integrity.Statuses(e.ChannelReport))) {
		parsed[id] = string(st)
	}
	tests := append(append([]string{}, e.Expected.FailToPass...), e.Expected.PassToPass...)
	tests = integrity.Vouched(tests, patch.GitHeaderPaths(e.TestPatch), parsed)
	return e.Channel.Judge(logged, tests, parsed, e.ChannelReport == nil)
}

// HarnessLog is e's log without the canary run's output, which a
// harness's parser must never read (its tests are no instance's): every
// grader reads this, not e.Log.
func HarnessLog(e Evaluation) string {
	if !e.Canary.Active() {
		return e.Log
	}
	before, rest, ok := strings.Cut(e.Log, e.Canary.Start()+"\n")
	if !ok {
		return e.Log
	}
	_, after, _ := strings.Cut(rest, e.Canary.End())
	return before + after
}

// Reward is the verdict's reward in [0, 1] (RewardOf): 0 without tests
// status or when the integrity check voided it.
func (v Verdict) Reward(mode api.RewardMode) float64 {
	if v.Voided || v.Report.TestsStatus == nil {
		return 0
	}
	return RewardOf(*v.Report.TestsStatus, mode)
}
