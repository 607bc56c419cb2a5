package grading

import "strings"

// ParseSympy is the harness's parse_log_sympy, for SymPy's own runner
// (bin/test -C --verbose), which prints one line per test:
//
//	test_expand_ok ok
//	test_fails F
//	test_errors E
//
// and a banner per failure or error ("____ sympy/core/tests/test_x.py:test_y ____"),
// which the harness records as FAILED under "path.py:test_y". Skips ("s",
// "w"), expected failures ("f") and unexpected passes ("X") are not
// recorded, as in the harness.
func ParseSympy(log string) StatusMap {
	m := StatusMap{}
	for _, line := range pyLines(log) {
		if name, ok := sympyBanner(line); ok {
			m[name] = Failed
		}
	}
	for _, line := range pyLines(log) {
		line = pyStrip(line)
		if !strings.HasPrefix(line, "test_") {
			continue
		}
		var st Status
		switch {
		case strings.HasSuffix(line, " E"):
			st = Error
		case strings.HasSuffix(line, " F"):
			st = Failed
		case strings.HasSuffix(line, " ok"):
			st = Passed
		default:
			continue
		}
		m[pyFields(line)[0]] = st
	}
	return m
}

// sympyBanner finds the harness's match of `(_*) (.*)\.py:(.*) (_*)` in one
// line and returns "<group 2>.py:<group 3>". The match starts at the first
// space of the line (after any underscores before it); group 2 runs to the
// last ".py:" that still has a space after it, and group 3 to the last space
// of the line.
func sympyBanner(line string) (string, bool) {
	sp := strings.IndexByte(line, ' ')
	if sp < 0 {
		return "", false
	}
	rest := line[sp+1:]
	last := strings.LastIndexByte(rest, ' ')
	if last < 0 {
		return "", false
	}
	i := strings.LastIndex(rest[:last], ".py:")
	if i < 0 {
		return "", false
	}
	return rest[:i] + ".py:" + rest[i+4:last], true
}
