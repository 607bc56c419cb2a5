package multiswe

// cargo test: the harness's parser of tokio, bytes, ripgrep and rayon. Each
// line, stripped, that starts "test <name> ... ok" passed, "... FAILED"
// failed, "... ignored" was skipped. The "..." are any three characters, as
// in the harness's pattern, and nothing after the status word counts.
var (
	cargoPass = pyRegexp(`^test (\S+) ... ok`)
	cargoFail = pyRegexp(`^test (\S+) ... FAILED`)
	cargoSkip = pyRegexp(`^test (\S+) ... ignored`)
)

// ParseCargo reads the output of cargo test.
func ParseCargo(log string) (Result, error) {
	r := newResult()
	for _, line := range pySplitLines(log) {
		line = pyStrip(line)
		if m := cargoPass.FindStringSubmatch(line); m != nil {
			r.Passed.add(m[1])
		}
		if m := cargoFail.FindStringSubmatch(line); m != nil {
			r.Failed.add(m[1])
		}
		if m := cargoSkip.FindStringSubmatch(line); m != nil {
			r.Skipped.add(m[1])
		}
	}
	return r, nil
}
