package grading

import "strings"

// ParseMatplotlib is the harness's parse_log_matplotlib: the -rA summary
// lines, with the MouseButton parameters of matplotlib's event tests
// spelled as their numbers ("test_x[MouseButton.LEFT]" becomes
// "test_x[1]"). It copies the first word of the line as the status, as the
// harness does, so a line such as "ERRORS x" yields the status "ERRORS",
// which grading counts as neither passing nor failing.
func ParseMatplotlib(log string) StatusMap {
	m := StatusMap{}
	for _, line := range pyLines(log) {
		line = strings.ReplaceAll(line, "MouseButton.LEFT", "1")
		line = strings.ReplaceAll(line, "MouseButton.RIGHT", "3")
		known := false
		for _, st := range statuses {
			if strings.HasPrefix(line, string(st)) {
				known = true
				break
			}
		}
		if !known {
			continue
		}
		if strings.HasPrefix(line, string(Failed)) {
			line = strings.ReplaceAll(line, " - ", " ")
		}
		f := pyFields(line)
		if len(f) <= 1 {
			continue
		}
		m[f[1]] = Status(f[0])
	}
	return m
}
