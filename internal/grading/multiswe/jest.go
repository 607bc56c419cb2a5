package multiswe

import (
	"errors"
	"fmt"
)

// Jest's default reporter: the harness's parsers of dayjs and darkreader.
// A line, stripped, "PASS <file>" or "FAIL <file>" gives the test file (the
// suite) its status and makes it the current suite; "✓ <title>" and
// "✕ <title>" give "<suite>:<title>" its status. A trailing " (<time>)" is
// not part of a name. A test line before any suite line is an error
// (ErrNoSuite), as in the harness. The two differ in their patterns only:
// darkreader's suite is a name without whitespace, and it drops any
// trailing parenthesis, not only a time.
type jestPatterns struct {
	passSuite, failSuite, passTest, failTest *pyPattern
}

var (
	jestDayjs = jestPatterns{
		passSuite: pyRegexp(`^PASS (.+?)(?:\s\(\d*\.?\d+\s*\w+\))?$`),
		failSuite: pyRegexp(`^FAIL (.+?)(?:\s\(\d*\.?\d+\s*\w+\))?$`),
		passTest:  pyRegexp(`^✓ (.+?)(?:\s\(\d*\.?\d+\s*\w+\))?$`),
		failTest:  pyRegexp(`^✕ (.+?)(?:\s\(\d*\.?\d+\s*\w+\))?$`),
	}
	jestDarkreader = jestPatterns{
		passSuite: pyRegexp(`^PASS (\S+)(\s*\(.+\))?$`),
		failSuite: pyRegexp(`^FAIL (\S+)(\s*\(.+\))?$`),
		passTest:  pyRegexp(`^✓ (.+?)(\s+\(.+\))?$`),
		failTest:  pyRegexp(`^✕ (.+?)(\s+\(.+\))?$`),
	}
)

// ErrNoSuite: a jest log names a test before any test file.
var ErrNoSuite = errors.New("test result before any suite")

// ParseJest reads jest's output as dayjs's harness does.
func ParseJest(log string) (Result, error) { return jestDayjs.parse(log) }

// ParseJestDarkreader reads jest's output as darkreader's harness does.
func ParseJestDarkreader(log string) (Result, error) { return jestDarkreader.parse(log) }

func (p jestPatterns) parse(log string) (Result, error) {
	r := newResult()
	suite, inSuite := "", false
	for _, line := range pySplitLines(log) {
		line = pyStrip(line)
		if line == "" {
			continue
		}
		if m := p.passSuite.FindStringSubmatch(line); m != nil {
			suite, inSuite = m[1], true
			r.Passed.add(suite)
		}
		if m := p.failSuite.FindStringSubmatch(line); m != nil {
			suite, inSuite = m[1], true
			r.Failed.add(suite)
		}
		for _, t := range []struct {
			re *pyPattern
			to set
		}{{p.passTest, r.Passed}, {p.failTest, r.Failed}} {
			m := t.re.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			if !inSuite {
				return Result{}, fmt.Errorf("%w: %q", ErrNoSuite, line)
			}
			t.to.add(suite + ":" + m[1])
		}
	}
	return r, nil
}
