package grading

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

// Outcomes lists which tests of one list succeeded and which failed. Both
// slices are non-nil so that JSON shows [] rather than null.
type Outcomes struct {
	Success []string `json:"success"`
	Failure []string `json:"failure"`
}

// TestsStatus is the harness's tests_status object.
type TestsStatus struct {
	FailToPass Outcomes `json:"FAIL_TO_PASS"`
	PassToPass Outcomes `json:"PASS_TO_PASS"`
	FailToFail Outcomes `json:"FAIL_TO_FAIL"`
	PassToFail Outcomes `json:"PASS_TO_FAIL"`
}

// Resolution is the harness's ResolvedStatus.
type Resolution string

// The harness's resolution values.
const (
	ResolvedFull    Resolution = "RESOLVED_FULL"
	ResolvedPartial Resolution = "RESOLVED_PARTIAL"
	ResolvedNo      Resolution = "RESOLVED_NO"
)

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
func Grade(m StatusMap, exp Expected, opt Options) TestsStatus {
	failOnly := opt.EvalType == FailOnly
	check := func(tests []string, isP2P bool) Outcomes {
		o := Outcomes{Success: []string{}, Failure: []string{}}
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
	ts := TestsStatus{
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

// rate is the harness's compute_fail_to_pass / compute_pass_to_pass.
func (o Outcomes) rate() float64 {
	total := len(o.Success) + len(o.Failure)
	if total == 0 {
		return 1
	}
	return float64(len(o.Success)) / float64(total)
}

// FailToPassRate is the share of graded FAIL_TO_PASS tests that succeeded (1 when none).
func (ts TestsStatus) FailToPassRate() float64 { return ts.FailToPass.rate() }

// PassToPassRate is the share of graded PASS_TO_PASS tests that succeeded (1 when none).
func (ts TestsStatus) PassToPassRate() float64 { return ts.PassToPass.rate() }

// Resolution is the harness's get_resolution_status.
func (ts TestsStatus) Resolution() Resolution {
	// rate()==1 exactly when there is no failure; 0<rate<1 when both lists are non-empty.
	f2pAll := len(ts.FailToPass.Failure) == 0
	p2pAll := len(ts.PassToPass.Failure) == 0
	f2pSome := len(ts.FailToPass.Success) > 0 && len(ts.FailToPass.Failure) > 0
	switch {
	case f2pAll && p2pAll:
		return ResolvedFull
	case f2pSome && p2pAll:
		return ResolvedPartial
	default:
		return ResolvedNo
	}
}

// Resolved reports whether the resolution is FULL.
func (ts TestsStatus) Resolved() bool { return ts.Resolution() == ResolvedFull }

// RewardMode chooses how a graded evaluation becomes a number.
type RewardMode string

const (
	// RewardBinary: 1 when resolved (FULL), else 0.
	RewardBinary RewardMode = "binary"
	// RewardFraction: the share of FAIL_TO_PASS and PASS_TO_PASS tests that
	// succeeded, counted together; 1 when resolved and 1 when no test is
	// graded. A dense signal for training, not a SWE-bench metric.
	RewardFraction RewardMode = "fraction"
)

// Reward turns the tests status into a reward in [0, 1].
func (ts TestsStatus) Reward(mode RewardMode) float64 {
	if ts.Resolved() {
		return 1
	}
	if mode != RewardFraction {
		return 0
	}
	ok := len(ts.FailToPass.Success) + len(ts.PassToPass.Success)
	total := ok + len(ts.FailToPass.Failure) + len(ts.PassToPass.Failure)
	if total == 0 {
		return 1
	}
	return float64(ok) / float64(total)
}
