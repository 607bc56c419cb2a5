package multiswe

import (
	"strings"
)

// go test -v: the harness's parser of go-zero. Each line, stripped, that
// starts "--- PASS: <name>" passed, "--- FAIL: <name>" or "FAIL[:][ ]<name>"
// (a package's FAIL line) failed, "--- SKIP: <name>" was skipped. A name is
// recorded without its last "/" component: a subtest counts for its
// parent, and a package path for its parent directory. Its quirks are
// kept: a pass is ignored only when the full name already failed, a skip
// is recorded only for a full name that already failed, and a removal uses
// the full name while additions use the shortened one, so a parent with a
// passing and a failing subtest ends up in both sets (which the harness
// refuses: ErrConflict).
var (
	goPass  = pyRegexp(`^--- PASS: (\S+)`)
	goFails = []*pyPattern{pyRegexp(`^--- FAIL: (\S+)`), pyRegexp(`^FAIL:?\s?(.+?)\s`)}
	goSkip  = pyRegexp(`^--- SKIP: (\S+)`)
)

// goParent is the name without its last "/" component.
func goParent(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[:i]
	}
	return name
}

// ParseGoTest reads the output of go test -v.
func ParseGoTest(log string) (Result, error) {
	r := newResult()
	for _, line := range pySplitLines(log) {
		line = pyStrip(line)
		if m := goPass.FindStringSubmatch(line); m != nil && !r.Failed.has(m[1]) {
			r.Skipped.remove(m[1])
			r.Passed.add(goParent(m[1]))
		}
		for _, re := range goFails {
			if m := re.FindStringSubmatch(line); m != nil {
				r.Passed.remove(m[1])
				r.Skipped.remove(m[1])
				r.Failed.add(goParent(m[1]))
			}
		}
		if m := goSkip.FindStringSubmatch(line); m != nil && !r.Passed.has(m[1]) && r.Failed.has(m[1]) {
			r.Skipped.add(goParent(m[1]))
		}
	}
	return r, nil
}
