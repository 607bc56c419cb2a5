package grading

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Markers an evaluation script prints around the test command, and the
// harness's markers for runs that went wrong, as the harness spells them.
// A log with any of the bad markers, or without both test markers, has no
// test results.
const (
	StartTestOutput = ">>>>> Start Test Output"
	EndTestOutput   = ">>>>> End Test Output"
	ApplyPatchFail  = ">>>>> Patch Apply Failed"
	ResetFailed     = ">>>>> Reset Failed"
	TestsError      = ">>>>> Tests Errored"
	TestsTimeout    = ">>>>> Tests Timed Out"
	// TestExitCode is followed by ": <n>", the test command's own exit
	// status, printed after EndTestOutput (the harness's newer scripts).
	TestExitCode = ">>>>> Test Exit Code"
)

// LogProblem says why a log has no test results.
type LogProblem string

// The reasons ParseEvalLog finds no test results.
const (
	LogOK             LogProblem = ""
	LogPatchFailed    LogProblem = "patch apply failed"
	LogResetFailed    LogProblem = "reset failed"
	LogTestsErrored   LogProblem = "tests errored"
	LogTestsTimedOut  LogProblem = "tests timed out"
	LogMarkersMissing LogProblem = "test output markers missing"
	// LogExitMismatch: the test command exited non-zero, yet the log reports
	// tests and none of them failed: the log does not describe the run (a
	// patch can print its own PASSED lines), so it is not trusted.
	LogExitMismatch LogProblem = "the test command failed but the log reports no failing test"
	// LogSuiteNotRun: graded FAIL_ONLY, the log has no test result and no
	// runner's summary of tests that ran (SuiteRan), so it is not taken for
	// a run without failures (Judge).
	LogSuiteNotRun LogProblem = "no test result and no sign that the test suite ran"
)

// suiteRanRE matches the summaries JavaScript test runners print when they
// ran at least one test (karma, mocha, jest, tap, jasmine, openlayers'
// rendering cases): the evidence swebench 5.x's get_logs_eval asks of a log
// with no parsed result. Every count must be non-zero: a runner that
// started and ran nothing says "Executed 0 of 0". It is compiled on first use.
var suiteRanRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?m)Executed [1-9]\d* of \d+` +
		`|TOTAL: [1-9]\d* (?:SUCCESS|FAILED)` +
		`|[1-9]\d* passing` +
		`|Tests:\s+[1-9]\d*` +
		`|Test Suites:\s+(?:\d+ \w+, )*[1-9]\d* total` +
		`|^# tests [1-9]\d*` +
		`|[1-9]\d* specs?, \d+ failures?` +
		`|': ok$`)
})

// SuiteRan reports whether log shows that a test runner ran tests although
// no result could be parsed from it.
func SuiteRan(log string) bool { return suiteRanRE().MatchString(log) }

// ExitCodeOf reads the TestExitCode line of a log: the first
// ">>>>> Test Exit Code: <n>".
func ExitCodeOf(log string) (int, bool) {
	_, after, found := strings.Cut(log, TestExitCode+":")
	if !found {
		return 0, false
	}
	after = strings.TrimLeft(after, " \t")
	end := 0
	for end < len(after) && (after[end] >= '0' && after[end] <= '9' || end == 0 && after[end] == '-') {
		end++
	}
	n, err := strconv.Atoi(after[:end])
	return n, err == nil
}

// ParseEvalLog reads a whole evaluation log as the harness's get_logs_eval
// does: a log that contains a bad marker, or lacks either test marker, has
// no results (found is false, problem says why). Otherwise the text between
// the first start marker and the first end marker after it is parsed; if
// that yields nothing, the whole log is parsed instead (test output that
// went to another stream). A log whose TestExitCode line says the test
// command failed while its tests all passed has no results either
// (LogExitMismatch), as in the harness.
func ParseEvalLog(parse ParseFunc, log string) (m StatusMap, problem LogProblem) {
	for _, bad := range [...]struct {
		marker  string
		problem LogProblem
	}{
		{ApplyPatchFail, LogPatchFailed},
		{ResetFailed, LogResetFailed},
		{TestsError, LogTestsErrored},
		{TestsTimeout, LogTestsTimedOut},
	} {
		if strings.Contains(log, bad.marker) {
			return StatusMap{}, bad.problem
		}
	}
	if !strings.Contains(log, StartTestOutput) || !strings.Contains(log, EndTestOutput) {
		return StatusMap{}, LogMarkersMissing
	}
	_, after, _ := strings.Cut(log, StartTestOutput)
	between, _, _ := strings.Cut(after, EndTestOutput)
	m = parse(between)
	if len(m) == 0 {
		m = parse(log)
	}
	if code, ok := ExitCodeOf(log); ok && code != 0 && len(m) > 0 && !m.anyFailed() {
		return StatusMap{}, LogExitMismatch
	}
	return m, LogOK
}
