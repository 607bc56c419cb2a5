package grading

// The harness's Go parser: go test -v's "--- PASS: TestX (0.00s)" lines
// (swebench log_parsers/go.py), for caddy, terraform, prometheus, hugo
// and gin.

func init() { registerMultilingual("gotest", ParseGoTest) }

var goTestLine = pyRegexp(`^--- (PASS|FAIL|SKIP): (.+) \((.+)\)$`)

// ParseGoTest is the harness's parse_log_gotest.
func ParseGoTest(log string) StatusMap {
	return matchLines(log, goTestLine, true, byWord(2, 1, map[string]Status{"PASS": Passed, "FAIL": Failed, "SKIP": Skipped}))
}
