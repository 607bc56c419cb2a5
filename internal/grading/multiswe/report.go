package multiswe

import (
	"errors"
	"fmt"
	"sort"

	"github.com/minisandbox/msb/internal/dataset"
)

// Transition is one test's status in the three runs.
type Transition struct{ Run, Test, Fix Status }

// Why a report is not valid, in the order the harness checks.
var (
	ErrNoFixResults = errors.New("the fix run has no test results")
	ErrNewFailure   = errors.New("a test that passed with the test patch fails with the fix")
	ErrNothingFixed = errors.New("no test goes from not passing to passing with the fix")
	ErrAnomaly      = errors.New("a test passed on the base commit, is absent or skipped with the test patch and fails with the fix")
)

// Report is the harness's report (report.py) on one instance's three runs.
type Report struct {
	Valid bool
	// Invalid says why the report is not valid (one of the ErrX above,
	// naming the first test in name order that shows it); nil when valid.
	Invalid error
	// The tests by transition from the test run to the fix run, filled in
	// only when valid: PASS→PASS, FAIL→PASS, SKIP→PASS, NONE→PASS.
	P2P, F2P, S2P, N2P map[string]Transition
}

// NewReport applies the harness's rules to three runs: the base commit
// (run), with the test patch (test), with test and fix patches (fix).
// Every test any run names is considered. Valid means, checked in order:
// the fix run names some test; no test goes from PASS with the test patch
// to FAIL with the fix; some test goes from anything but PASS to PASS;
// no test PASSes on the base, is NONE or SKIP with the test patch and
// FAILs with the fix.
func NewReport(run, test, fix Result) Report {
	tests := map[string]Transition{}
	for _, r := range []Result{run, test, fix} {
		for name := range r.Statuses() {
			tests[name] = Transition{run.Status(name), test.Status(name), fix.Status(name)}
		}
	}
	names := make([]string, 0, len(tests))
	for n := range tests {
		names = append(names, n)
	}
	sort.Strings(names)
	invalid := func(err error, name string) Report {
		if name != "" {
			t := tests[name]
			err = fmt.Errorf("%w: %q (%s, %s, %s)", err, name, t.Run, t.Test, t.Fix)
		}
		return Report{Invalid: err}
	}
	if fix.Count() == 0 {
		return invalid(ErrNoFixResults, "")
	}
	for _, n := range names {
		if t := tests[n]; t.Test == Pass && t.Fix == Fail {
			return invalid(ErrNewFailure, n)
		}
	}
	fixed := false
	for _, n := range names {
		if t := tests[n]; t.Test != Pass && t.Fix == Pass {
			fixed = true
			break
		}
	}
	if !fixed {
		return invalid(ErrNothingFixed, "")
	}
	for _, n := range names {
		if t := tests[n]; (t.Test == None || t.Test == Skip) && t.Fix == Fail && t.Run == Pass {
			return invalid(ErrAnomaly, n)
		}
	}
	rep := Report{Valid: true, P2P: map[string]Transition{}, F2P: map[string]Transition{}, S2P: map[string]Transition{}, N2P: map[string]Transition{}}
	for n, t := range tests {
		if t.Fix != Pass {
			continue
		}
		switch t.Test {
		case Pass:
			rep.P2P[n] = t
		case Fail:
			rep.F2P[n] = t
		case Skip:
			rep.S2P[n] = t
		case None:
			rep.N2P[n] = t
		}
	}
	return rep
}

// Verdict is the harness's evaluation of one fix run (gen_report.py's
// evaluation mode): the report of the row's recorded base and test-patch
// runs with this fix run, and whether it resolves the instance.
type Verdict struct {
	Report   Report
	Resolved bool
	// Missing lists, when valid but not resolved, each row test (by set:
	// "p2p", "f2p", "s2p", "n2p") the report does not put in the same set.
	Missing []string
}

// Evaluate grades a fix run against a row: resolved when the report is
// valid and every test of the row's p2p, f2p, s2p and n2p sets is in the
// report's set of the same name.
func Evaluate(row *dataset.MultiSWE, fix Result) Verdict {
	v := Verdict{Report: NewReport(ResultOf(row.Run), ResultOf(row.TestPatch), fix)}
	if !v.Report.Valid {
		return v
	}
	for _, s := range []struct {
		kind string
		want map[string]dataset.Transition
		got  map[string]Transition
	}{{"p2p", row.P2P, v.Report.P2P}, {"f2p", row.F2P, v.Report.F2P}, {"s2p", row.S2P, v.Report.S2P}, {"n2p", row.N2P, v.Report.N2P}} {
		for n := range s.want {
			if _, ok := s.got[n]; !ok {
				v.Missing = append(v.Missing, s.kind+": "+n)
			}
		}
	}
	sort.Strings(v.Missing)
	v.Resolved = len(v.Missing) == 0
	return v
}
