package multiswe

import (
	"errors"
	"fmt"
	"strings"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/grading"
)

func init() {
	grading.Register(dataset.MultiSWEBench, NewGrader)
	registerParsers()
}

// ErrNotMultiSWE: the instance is not a Multi-SWE-bench row.
var ErrNotMultiSWE = errors.New("not a Multi-SWE-bench instance")

// ErrNoRecordedRuns: the row lacks the base or test-patch run its fix run
// is compared with.
var ErrNoRecordedRuns = errors.New("the row has no recorded run_result and test_patch_result")

// Grader grades one Multi-SWE-bench instance: its evaluation's log is the
// output of the harness's fix run (test and fix patches applied), read by
// the repository's parser and judged against the row's recorded runs.
type Grader struct {
	row   *dataset.MultiSWE
	parse ParseFunc
}

// NewGrader makes the grader of a Multi-SWE-bench instance whose spec
// names the log parser parser: a framework ("multiswe/<framework>"), or
// "" for the repository's (Repos).
func NewGrader(in dataset.Instance, parser string) (grading.Grader, error) {
	if in.MultiSWE == nil {
		return nil, ErrNotMultiSWE
	}
	if in.MultiSWE.Run == nil || in.MultiSWE.TestPatch == nil {
		return nil, ErrNoRecordedRuns
	}
	p, err := parserOf(in.Repo, parser)
	if err != nil {
		return nil, err
	}
	return &Grader{row: in.MultiSWE, parse: p}, nil
}

// Name is the harness's name.
func (g *Grader) Name() string { return string(dataset.MultiSWEBench) }

// Judge grades one evaluation. Infrastructure problems come first and are
// reported as such, as grading.Judge does; the log is the harness's run
// (grading.HarnessLog: the integrity canary's run left out); a log the
// harness's parse_log
// would refuse is unresolved; otherwise Evaluate decides. The tests
// status lists the row's f2p, s2p and n2p tests as FAIL_TO_PASS and its
// p2p tests as PASS_TO_PASS, each a success when the report puts it in
// the row's set. The verdict then passes the integrity stage.
func (g *Grader) Judge(e grading.Evaluation) grading.Verdict {
	return grading.Integrity(e, g.judge(e))
}

func (g *Grader) judge(e grading.Evaluation) grading.Verdict {
	v, done := grading.Pregrade(e)
	if done {
		return v
	}
	v.Report.PatchSuccessfullyApplied = true
	fix, err := Parse(g.parse, grading.HarnessLog(e))
	if err != nil {
		v.Resolution, v.Outcome, v.Detail = api.ResolvedNo, api.OutcomeUnresolved, fmt.Sprintf("log: %v", err)
		return v
	}
	v.Statuses = statusMap(fix)
	mv := Evaluate(g.row, fix)
	ts := g.testsStatus(mv)
	v.Report.TestsStatus = &ts
	v.Report.Resolved = mv.Resolved
	v.Resolution, v.Outcome = api.ResolvedNo, api.OutcomeUnresolved
	switch {
	case mv.Resolved:
		v.Resolution, v.Outcome = api.ResolvedFull, api.OutcomeResolved
	case !mv.Report.Valid:
		v.Detail = "report not valid: " + mv.Report.Invalid.Error()
	default:
		v.Detail = "not in their sets: " + strings.Join(mv.Missing, "; ")
	}
	return v
}

// testsStatus sorts the row's tests into the harness's tests_status shape.
func (g *Grader) testsStatus(mv Verdict) api.TestsStatus {
	empty := func() api.Outcomes { return api.Outcomes{Success: []string{}, Failure: []string{}} }
	ts := api.TestsStatus{FailToPass: empty(), PassToPass: empty(), FailToFail: empty(), PassToFail: empty()}
	for _, s := range []struct {
		want map[string]dataset.Transition
		got  map[string]Transition
		to   *api.Outcomes
	}{{g.row.F2P, mv.Report.F2P, &ts.FailToPass}, {g.row.S2P, mv.Report.S2P, &ts.FailToPass},
		{g.row.N2P, mv.Report.N2P, &ts.FailToPass}, {g.row.P2P, mv.Report.P2P, &ts.PassToPass}} {
		for _, n := range sortedKeys(s.want) {
			if _, ok := s.got[n]; ok && mv.Report.Valid {
				s.to.Success = append(s.to.Success, n)
			} else {
				s.to.Failure = append(s.to.Failure, n)
			}
		}
	}
	return ts
}

// statusMap spells a run's statuses as grading does.
func statusMap(r Result) grading.StatusMap {
	m := grading.StatusMap{}
	for n, st := range r.Statuses() {
		switch st {
		case Pass:
			m[n] = grading.Passed
		case Fail:
			m[n] = grading.Failed
		case Skip:
			m[n] = grading.Skipped
		}
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	s := set{}
	for k := range m {
		s.add(k)
	}
	return s.sorted()
}
