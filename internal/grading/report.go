package grading

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Outcome is what happened to one evaluation. Only OutcomeResolved and
// OutcomeUnresolved are verdicts on the patch; the others say the patch
// could not be judged (or, for an empty patch, was not).
type Outcome string

// The outcomes of an evaluation.
const (
	OutcomeResolved         Outcome = "resolved"
	OutcomeUnresolved       Outcome = "unresolved"
	OutcomePatchApplyFailed Outcome = "patch_apply_failed"
	OutcomeEmptyPatch       Outcome = "empty_patch"
	OutcomeTestTimeout      Outcome = "test_timeout"
	OutcomeEnvBuildFailed   Outcome = "env_build_failed"
	OutcomeInfraError       Outcome = "infra_error"
)

// AllOutcomes lists every outcome, verdicts first.
var AllOutcomes = []Outcome{
	OutcomeResolved, OutcomeUnresolved, OutcomePatchApplyFailed, OutcomeEmptyPatch,
	OutcomeTestTimeout, OutcomeEnvBuildFailed, OutcomeInfraError,
}

// IsVerdict reports whether the outcome judges the patch (resolved or unresolved).
func (o Outcome) IsVerdict() bool { return o == OutcomeResolved || o == OutcomeUnresolved }

// InstanceReport is one instance's entry in the harness's report.json.
type InstanceReport struct {
	PatchIsNone              bool         `json:"patch_is_None"`
	PatchExists              bool         `json:"patch_exists"`
	PatchSuccessfullyApplied bool         `json:"patch_successfully_applied"`
	Resolved                 bool         `json:"resolved"`
	TestsStatus              *TestsStatus `json:"tests_status,omitempty"`
}

// ReportFile is the content of a per-instance report.json:
// {"<instance_id>": {...}}.
type ReportFile map[string]InstanceReport

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
}

// Verdict is Judge's answer.
type Verdict struct {
	Outcome    Outcome
	Detail     string // why, for outcomes other than resolved/unresolved
	Report     InstanceReport
	Resolution Resolution // empty unless graded
	Statuses   StatusMap  // parsed test statuses; empty unless the log was read
}

// ErrNoParser is returned in a verdict's detail when an Evaluation has no Parse.
var ErrNoParser = errors.New("no log parser")

// Judge grades one evaluation. Infrastructure problems take precedence and
// are reported as such, never as "unresolved": an environment that did not
// build, an infrastructure error, an empty patch (unless GradeEmpty), a
// patch that did not apply, a timeout, a log without test results. Only a
// log with test results is graded.
func Judge(e Evaluation) Verdict {
	v := Verdict{Statuses: StatusMap{}}
	v.Report.PatchIsNone = e.Patch == nil
	v.Report.PatchExists = e.Patch != nil
	empty := e.Patch == nil || strings.TrimSpace(*e.Patch) == ""
	fail := func(o Outcome, format string, args ...any) Verdict {
		v.Outcome, v.Detail = o, fmt.Sprintf(format, args...)
		return v
	}
	switch {
	case e.InfraErr != nil:
		return fail(OutcomeInfraError, "%v", e.InfraErr)
	case e.EnvBuildErr != nil:
		return fail(OutcomeEnvBuildFailed, "%v", e.EnvBuildErr)
	case empty && !e.GradeEmpty:
		return fail(OutcomeEmptyPatch, "the prediction has no patch")
	case e.ApplyErr != nil:
		return fail(OutcomePatchApplyFailed, "%v", e.ApplyErr)
	case e.TimedOut:
		return fail(OutcomeTestTimeout, "the tests ran past their timeout")
	case e.Parse == nil:
		return fail(OutcomeInfraError, "%v", ErrNoParser)
	}
	m, problem := ParseEvalLog(e.Parse, e.Log)
	switch problem {
	case LogOK:
	case LogPatchFailed:
		return fail(OutcomePatchApplyFailed, "log: %s", problem)
	case LogTestsTimedOut:
		return fail(OutcomeTestTimeout, "log: %s", problem)
	default:
		return fail(OutcomeInfraError, "log: %s", problem)
	}
	opt := e.Options
	if opt.EvalType == "" {
		opt.EvalType = EvalTypeFor(e.Repo)
	}
	ts := Grade(m, e.Expected, opt)
	v.Statuses = m
	v.Resolution = ts.Resolution()
	v.Report.PatchSuccessfullyApplied = true
	v.Report.Resolved = ts.Resolved()
	v.Report.TestsStatus = &ts
	v.Outcome = OutcomeUnresolved
	if v.Report.Resolved {
		v.Outcome = OutcomeResolved
	}
	return v
}

// Summary is the harness's run summary (make_run_report), with the outcome
// of every instance added under "outcomes". Instances whose evaluation did
// not end in a verdict (patch did not apply, timeout, build failure,
// infrastructure error) are error_ids, as in the harness, where they leave
// no report.json.
type Summary struct {
	TotalInstances      int                  `json:"total_instances"`
	SubmittedInstances  int                  `json:"submitted_instances"`
	CompletedInstances  int                  `json:"completed_instances"`
	ResolvedInstances   int                  `json:"resolved_instances"`
	UnresolvedInstances int                  `json:"unresolved_instances"`
	EmptyPatchInstances int                  `json:"empty_patch_instances"`
	ErrorInstances      int                  `json:"error_instances"`
	CompletedIDs        []string             `json:"completed_ids"`
	IncompleteIDs       []string             `json:"incomplete_ids"`
	EmptyPatchIDs       []string             `json:"empty_patch_ids"`
	SubmittedIDs        []string             `json:"submitted_ids"`
	ResolvedIDs         []string             `json:"resolved_ids"`
	UnresolvedIDs       []string             `json:"unresolved_ids"`
	ErrorIDs            []string             `json:"error_ids"`
	SchemaVersion       int                  `json:"schema_version"`
	Outcomes            map[Outcome][]string `json:"outcomes"`
}

// Summarize builds the run summary. datasetIDs are all instances of the
// dataset (after filters), submitted the instances with a prediction, and
// outcomes the outcome of each instance that has finished. A submitted
// instance without an outcome is an error, as a missing report.json is for
// the harness; an instance without a prediction is incomplete.
func Summarize(datasetIDs, submitted []string, outcomes map[string]Outcome) Summary {
	s := Summary{
		TotalInstances: len(datasetIDs),
		SchemaVersion:  2,
		CompletedIDs:   []string{}, IncompleteIDs: []string{}, EmptyPatchIDs: []string{},
		SubmittedIDs: []string{}, ResolvedIDs: []string{}, UnresolvedIDs: []string{}, ErrorIDs: []string{},
		Outcomes: map[Outcome][]string{},
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
		o, done := outcomes[id]
		if done {
			s.Outcomes[o] = append(s.Outcomes[o], id)
		}
		switch {
		case o == OutcomeEmptyPatch:
			s.EmptyPatchIDs = append(s.EmptyPatchIDs, id)
		case o == OutcomeResolved:
			s.CompletedIDs = append(s.CompletedIDs, id)
			s.ResolvedIDs = append(s.ResolvedIDs, id)
		case o == OutcomeUnresolved:
			s.CompletedIDs = append(s.CompletedIDs, id)
			s.UnresolvedIDs = append(s.UnresolvedIDs, id)
		default: // not finished, or finished without a verdict
			s.ErrorIDs = append(s.ErrorIDs, id)
		}
	}
	for _, ids := range [][]string{s.CompletedIDs, s.IncompleteIDs, s.EmptyPatchIDs, s.SubmittedIDs, s.ResolvedIDs, s.UnresolvedIDs, s.ErrorIDs} {
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
	return s
}
