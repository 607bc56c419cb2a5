package multiswe

// Mocha's spec reporter: the harness's parser of axios. A line, stripped,
// "✔ <title>" passed and "<n>) <title>" failed; a trailing " (<time>)"
// such as " (12ms)" is not part of the title. Mocha numbers a failure
// twice: in the run ("1) title") and in the summary ("1) title:" for a
// top-level test, "2) suite" for a nested one), so, as in the harness,
// the failures also hold names such as "title:" and the suite's name.
var (
	mochaPass = pyRegexp(`^✔ (.+?)(?:\s\(\d*\.?\d*\s*\w+\))?$`)
	mochaFail = pyRegexp(`^\d+\) (.+?)(?:\s\(\d*\.?\d*\s*\w+\))?$`)
)

// ParseMocha reads the output of mocha's spec reporter.
func ParseMocha(log string) (Result, error) {
	r := newResult()
	for _, line := range pySplitLines(log) {
		line = pyStrip(line)
		if line == "" {
			continue
		}
		if m := mochaPass.FindStringSubmatch(line); m != nil {
			r.Passed.add(m[1])
		}
		if m := mochaFail.FindStringSubmatch(line); m != nil {
			r.Failed.add(m[1])
		}
	}
	return r, nil
}
