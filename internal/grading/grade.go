package grading

import "github.com/minisandbox/msb/internal/api"

// Keys of the harness's tests_status object.
const (
	FailToPass = "FAIL_TO_PASS"
	PassToPass = "PASS_TO_PASS"
	FailToFail = "FAIL_TO_FAIL"
	PassToFail = "PASS_TO_FAIL"
)

// EvalType says how tests missing from a log are graded.
type EvalType string

const (
	// PassAndFail: a test must be seen passing to succeed (all Python repositories).
	PassAndFail EvalType = "pass_and_fail"
	// FailOnly: a test fails only when the log reports it FAILED; for
	// repositories whose test reporters print only failures.
	FailOnly EvalType = "fail_only"
)

// FailOnlyRepos are the repositories the harness grades FAIL_ONLY (its
// FAIL_ONLY_REPOS): JavaScript projects whose reporters list only failures.
var FailOnlyRepos = map[string]bool{
	"chartjs/Chart.js": true,
	"markedjs/marked":  true,
	"processing/p5.js": true,
}

// EvalTypeFor returns the harness's evaluation type for a repository.
func EvalTypeFor(repo string) EvalType {
	if FailOnlyRepos[repo] {
		return FailOnly
	}
	return PassAndFail
}

// Expected holds an instance's test lists. FailToFail and PassToFail are
// graded only when Options.CalculateToFail is set, as in the harness.
type Expected struct {
	FailToPass []string
	PassToPass []string
	FailToFail []string
	PassToFail []string
}

// Options tune Grade.
type Options struct {
	EvalType        EvalType // PassAndFail when empty
	CalculateToFail bool     // also grade FailToFail and PassToFail
}

// passed: the harness's test_passed.
func passed(m StatusMap, test string) bool {
	st, ok := m[test]
	return ok && (st == Passed || st == XFail)
}

// failed: the harness's test_failed (missing counts as failed).
func failed(m StatusMap, test string) bool {
	st, ok := m[test]
	return !ok || st == Failed || st == Error || st == Skipped
}

// maintained: the harness's test_maintained, for PASS_TO_PASS.
func maintained(m StatusMap, test string) bool {
	return passed(m, test) || m[test] == Skipped
}

// Grade sorts each expected test into success or failure by its status in
// m, with the harness's rules (see the package comment). A test whose status
// is not one the harness knows lands in neither list, as in the harness.
func Grade(m StatusMap, exp Expected, opt Options) api.TestsStatus {
	failOnly := opt.EvalType == FailOnly
	check := func(tests []string, isP2P bool) api.Outcomes {
		o := api.Outcomes{Success: []string{}, Failure: []string{}}
		for _, t := range tests {
			switch {
			case failOnly:
				if st, ok := m[t]; ok && st == Failed {
					o.Failure = append(o.Failure, t)
				} else {
					o.Success = append(o.Success, t)
				}
			case isP2P && maintained(m, t), !isP2P && passed(m, t):
				o.Success = append(o.Success, t)
			case failed(m, t):
				o.Failure = append(o.Failure, t)
			}
		}
		return o
	}
	ts := api.TestsStatus{
		FailToPass: check(exp.FailToPass, false),
		PassToPass: check(exp.PassToPass, true),
		FailToFail: check(nil, false),
		PassToFail: check(nil, false),
	}
	if opt.CalculateToFail {
		ts.FailToFail = check(exp.FailToFail, false)
		ts.PassToFail = check(exp.PassToFail, false)
	}
	return ts
}

// ResolutionOf is the harness's get_resolution_status.
func ResolutionOf(ts api.TestsStatus) api.Resolution {
	// The harness compares success rates: 1 exactly when there is no failure,
	// strictly between 0 and 1 when both lists are non-empty.
	f2pAll := len(ts.FailToPass.Failure) == 0
	p2pAll := len(ts.PassToPass.Failure) == 0
	f2pSome := len(ts.FailToPass.Success) > 0 && len(ts.FailToPass.Failure) > 0
	switch {
	case f2pAll && p2pAll:
		return api.ResolvedFull
	case f2pSome && p2pAll:
		return api.ResolvedPartial
	default:
		return api.ResolvedNo
	}
}

// Resolved reports whether the resolution is FULL.
func Resolved(ts api.TestsStatus) bool { return ResolutionOf(ts) == api.ResolvedFull }

// RewardOf turns the tests status into a reward in [0, 1] (see
// api.RewardMode): 1 when resolved; with RewardFraction otherwise the share
// of FAIL_TO_PASS and PASS_TO_PASS tests that succeeded (1 when none is
// graded); 0 otherwise.
func RewardOf(ts api.TestsStatus, mode api.RewardMode) float64 {
	if Resolved(ts) {
		return 1
	}
	if mode != api.RewardFraction {
		return 0
	}
	ok := len(ts.FailToPass.Success) + len(ts.PassToPass.Success)
	total := ok + len(ts.FailToPass.Failure) + len(ts.PassToPass.Failure)
	if total == 0 {
		return 1
	}
	return float64(ok) / float64(total)
}
