package grading

import "strings"

// ParseSeaborn is the harness's parse_log_seaborn. It records only PASSED
// and FAILED results, from either the -rA summary ("PASSED name",
// "FAILED name - reason") or verbose lines ("name PASSED [ 50%]"); skips,
// errors and expected failures are not recorded.
func ParseSeaborn(log string) StatusMap {
	m := StatusMap{}
	for _, line := range pyLines(log) {
		switch {
		case strings.HasPrefix(line, string(Failed)):
			if f := pyFields(line); len(f) >= 2 {
				m[f[1]] = Failed
			}
		case strings.Contains(line, " "+string(Passed)+" "):
			if f := pyFields(line); len(f) >= 2 && f[1] == string(Passed) {
				m[f[0]] = Passed
			}
		case strings.HasPrefix(line, string(Passed)):
			if f := pyFields(line); len(f) >= 2 {
				m[f[1]] = Passed
			}
		}
	}
	return m
}
