package multiswe

// make check under automake's test driver: the harness's parser of jq. A
// line, stripped, that is exactly "PASS: <name>", "FAIL: <name>" or
// "SKIP: <name>" (a name without whitespace) gives that test's status.
var (
	automakePass = pyRegexp(`^PASS: (\S+)$`)
	automakeFail = pyRegexp(`^FAIL: (\S+)$`)
	automakeSkip = pyRegexp(`^SKIP: (\S+)$`)
)

// ParseAutomake reads the output of make check.
func ParseAutomake(log string) (Result, error) {
	r := newResult()
	for _, line := range pySplitLines(log) {
		line = pyStrip(line)
		if m := automakePass.FindStringSubmatch(line); m != nil {
			r.Passed.add(m[1])
		}
		if m := automakeFail.FindStringSubmatch(line); m != nil {
			r.Failed.add(m[1])
		}
		if m := automakeSkip.FindStringSubmatch(line); m != nil {
			r.Skipped.add(m[1])
		}
	}
	return r, nil
}
