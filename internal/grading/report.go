package grading

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/grading/integrity"
)

// Evaluation is everything known about one evaluation run, for Judge. The
// caller fills in what happened; Judge decides the outcome and grades.
type Evaluation struct {
	InstanceID string
	Repo       string  // for the evaluation type (FailOnlyRepos)
	Patch      *string // the model patch; nil when the prediction had none
	// GradeEmpty: run and grade an empty patch like any other (validation
	// checks that an empty patch does not resolve); otherwise an empty
	// patch is not run and its outcome is OutcomeEmptyPatch.
	GradeEmpty bool

	EnvBuildErr error // the environment could not be built
	ApplyErr    error // the patch did not apply, even with the tolerant fallbacks
	TimedOut    bool  // the test command ran past its timeout
	InfraErr    error // anything else that kept the tests from running or being read

	Log      string    // the evaluation log, with the test output markers
	Parse    ParseFunc // the instance's log parser
	Expected Expected
	Options  Options // EvalType empty: taken from Repo

	// TestPatch is the instance's test patch: the files the task asks to
	// change, for the integrity check of Patch.
	TestPatch string
	// TestCommand is the command the harness runs the tests with, and
	// BaseFiles the repository's files at the base commit that the
	// integrity check reads whole (integrity.BasePaths; a file not there
	// is absent), read before the patch is applied.
	TestCommand string
	BaseFiles   map[string]string
	// Integrity is what a tampered patch does to the verdict (empty: fail).
	Integrity api.IntegrityMode
	// Canary is the evaluation's canary (integrity.NewCanary): its run's
	// output in Log is judged by checkIntegrity and never graded.
	Canary integrity.Canary
	// CanaryNotes say how the canary ran when that is not what its mode
	// asked (a forked canary run as separate, and why): the report's
	// integrity_notes, never a reason.
	CanaryNotes []string
	// Channel is the evaluation's structured result channel
	// (integrity.NewChannel), and ChannelReport what its plugin wrote (nil:
	// the file is missing); checkIntegrity checks the log against it.
	Channel       integrity.Channel
	ChannelReport []byte
}

// Verdict is Judge's answer.
type Verdict struct {
	Outcome    api.Outcome
	Detail     string // why, for outcomes other than resolved/unresolved
	Report     api.InstanceReport
	Resolution api.Resolution // empty unless graded
	Statuses   StatusMap      // parsed test statuses; empty unless the log was read
	// Voided: the patch was found tampered under IntegrityFail; the
	// verdict is unresolved whatever the tests said (Reward is 0).
	Voided bool
}

// ErrNoParser is returned in a verdict's detail when an Evaluation has no Parse.
var ErrNoParser = errors.New("no log parser")

// Judge grades one evaluation. Infrastructure problems take precedence and
// are reported as such, never as "unresolved": an environment that did not
// build, an infrastructure error, an empty patch (unless GradeEmpty), a
// patch that did not apply, a timeout, a log without test results. Only a
// log with test results is graded, and a log the test command's exit status
// contradicts (LogExitMismatch) is unresolved without tests_status, as the
// harness reports it. Every verdict then passes the integrity check
// (checkIntegrity).
func Judge(e Evaluation) Verdict {
	graded := e
	graded.Log = HarnessLog(e)
	return checkIntegrity(e, judge(graded))
}

// Pregrade decides what an evaluation's log has no say in, for every
// grader: an infrastructure error, an environment that did not build, an
// empty patch (unless GradeEmpty), a patch that did not apply, a timeout.
// done says the verdict is final; else v holds the report's patch fields
// and the log is the grader's to read.
func Pregrade(e Evaluation) (v Verdict, done bool) {
	v = Verdict{Statuses: StatusMap{}}
	v.Report.PatchIsNone = e.Patch == nil
	v.Report.PatchExists = e.Patch != nil
	empty := e.Patch == nil || strings.TrimSpace(*e.Patch) == ""
	switch {
	case e.InfraErr != nil:
		v.Outcome, v.Detail = api.OutcomeInfraError, e.InfraErr.Error()
	case e.EnvBuildErr != nil:
		v.Outcome, v.Detail = api.OutcomeEnvBuildFailed, e.EnvBuildErr.Error()
	case empty && !e.GradeEmpty:
		v.Outcome, v.Detail = api.OutcomeEmptyPatch, "the prediction has no patch"
	case e.ApplyErr != nil:
		v.Outcome, v.Detail = api.OutcomePatchApplyFailed, e.ApplyErr.Error()
	case e.TimedOut:
		v.Outcome, v.Detail = api.OutcomeTestTimeout, "the tests ran past their timeout"
	default:
		return v, false
	}
	return v, true
}

func judge(e Evaluation) Verdict {
	v, done := Pregrade(e)
	if done {
		return v
	}
	fail := func(o api.Outcome, format string, args ...any) Verdict {
		v.Outcome, v.Detail = o, fmt.Sprintf(format, args...)
		return v
	}
	if e.Parse == nil {
		return fail(api.OutcomeInfraError, "%s", ErrNoParser.Error())
	}
	opt := e.Options
	if opt.EvalType == "" {
		opt.EvalType = EvalTypeFor(e.Repo)
	}
	m, problem := ParseEvalLog(e.Parse, e.Log)
	if problem == LogOK && len(m) == 0 && opt.EvalType == FailOnly && !SuiteRan(e.Log) {
		// FAIL_ONLY counts an absent test as passed: a suite that never
		// started would resolve every instance.
		problem = LogSuiteNotRun
	}
	switch problem {
	case LogOK:
	case LogPatchFailed:
		return fail(api.OutcomePatchApplyFailed, "log: %s", problem)
	case LogTestsTimedOut:
		return fail(api.OutcomeTestTimeout, "log: %s", problem)
	case LogExitMismatch, LogSuiteNotRun:
		v.Resolution = api.ResolvedNo
		return fail(api.OutcomeUnresolved, "log: %s", problem)
	default:
		return fail(api.OutcomeInfraError, "log: %s", problem)
	}
	ts := Grade(m, e.Expected, opt)
	v.Statuses = m
	v.Resolution = ResolutionOf(ts)
	v.Report.PatchSuccessfullyApplied = true
	v.Report.Resolved = Resolved(ts)
	v.Report.TestsStatus = &ts
	v.Outcome = api.OutcomeUnresolved
	if v.Report.Resolved {
		v.Outcome = api.OutcomeResolved
	}
	return v
}

// Finished is one instance's result for Summarize.
type Finished struct {
	Outcome api.Outcome
	Detail  string
}

// Summarize builds the harness's run summary for one model. datasetIDs are
// the selected instances of the dataset, submitted those this model has a
// prediction for, and finished the result of each submitted instance that
// finished. As in the harness: an instance without a prediction is
// incomplete; a resolved or unresolved one is completed (it has a
// report.json); an empty patch is counted apart; every other submitted
// instance, finished or not, is an error. Infrastructure outcomes are also
// infra_failure_ids, with the first line of their detail in
// failure_reasons.
func Summarize(model, runID string, datasetIDs, submitted []string, finished map[string]Finished) api.RunSummary {
	s := api.RunSummary{
		Model: model, RunID: runID,
		TotalInstances: len(datasetIDs),
		SchemaVersion:  2,
		CompletedIDs:   []string{}, IncompleteIDs: []string{}, EmptyPatchIDs: []string{},
		SubmittedIDs: []string{}, ResolvedIDs: []string{}, UnresolvedIDs: []string{}, ErrorIDs: []string{},
		InfraFailureIDs: []string{}, FailureReasons: map[string]string{},
		Outcomes: map[api.Outcome]api.List[string]{},
	}
	isSubmitted := make(map[string]bool, len(submitted))
	for _, id := range submitted {
		if !isSubmitted[id] {
			isSubmitted[id] = true
			s.SubmittedIDs = append(s.SubmittedIDs, id)
		}
	}
	for _, id := range datasetIDs {
		if !isSubmitted[id] {
			s.IncompleteIDs = append(s.IncompleteIDs, id)
			continue
		}
		f, done := finished[id]
		if done {
			s.Outcomes[f.Outcome] = append(s.Outcomes[f.Outcome], id)
		}
		switch {
		case f.Outcome == api.OutcomeEmptyPatch:
			s.EmptyPatchIDs = append(s.EmptyPatchIDs, id)
		case f.Outcome == api.OutcomeResolved:
			s.CompletedIDs = append(s.CompletedIDs, id)
			s.ResolvedIDs = append(s.ResolvedIDs, id)
		case f.Outcome == api.OutcomeUnresolved:
			s.CompletedIDs = append(s.CompletedIDs, id)
			s.UnresolvedIDs = append(s.UnresolvedIDs, id)
		default: // not finished, or finished without a verdict
			s.ErrorIDs = append(s.ErrorIDs, id)
			if f.Outcome.IsInfra() {
				s.InfraFailureIDs = append(s.InfraFailureIDs, id)
				s.FailureReasons[id], _, _ = strings.Cut(f.Detail, "\n")
			}
		}
	}
	for _, ids := range []api.List[string]{s.CompletedIDs, s.IncompleteIDs, s.EmptyPatchIDs, s.SubmittedIDs, s.ResolvedIDs, s.UnresolvedIDs, s.ErrorIDs, s.InfraFailureIDs} {
		sort.Strings(ids)
	}
	for _, ids := range s.Outcomes {
		sort.Strings(ids)
	}
	s.SubmittedInstances = len(s.SubmittedIDs)
	s.CompletedInstances = len(s.CompletedIDs)
	s.ResolvedInstances = len(s.ResolvedIDs)
	s.UnresolvedInstances = len(s.UnresolvedIDs)
	s.EmptyPatchInstances = len(s.EmptyPatchIDs)
	s.ErrorInstances = len(s.ErrorIDs)
	s.InfraFailureInstances = len(s.InfraFailureIDs)
	return s
}
