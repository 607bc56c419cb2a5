package grading

import (
	"encoding/json"
	"sort"
)

// Status is what one test did in one run. The five named values are the
// harness's TestStatus values. A parser that copies the status word from the
// log (as the harness's matplotlib parser does) may produce another string;
// grading treats such a status as neither passing nor failing, as the
// harness does.
type Status string

// The statuses of the SWE-bench harness.
const (
	Passed  Status = "PASSED"
	Failed  Status = "FAILED"
	Skipped Status = "SKIPPED"
	Error   Status = "ERROR"
	XFail   Status = "XFAIL"
)

// statuses lists the harness's statuses in the harness's order.
var statuses = [...]Status{Failed, Passed, Skipped, Error, XFail}

// Known reports whether s is one of the five harness statuses.
func (s Status) Known() bool {
	for _, k := range statuses {
		if s == k {
			return true
		}
	}
	return false
}

// StatusMap maps a test name, as the framework prints it, to its status.
type StatusMap map[string]Status

// Names returns the test names in sorted order.
func (m StatusMap) Names() []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// MarshalJSON writes the map with sorted keys (encoding/json sorts map keys;
// this method exists so that a nil map is written as {} rather than null).
func (m StatusMap) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(map[string]Status(m))
}

// anyFailed reports whether some test FAILED or had an ERROR.
func (m StatusMap) anyFailed() bool {
	for _, st := range m {
		if st == Failed || st == Error {
			return true
		}
	}
	return false
}

// Flips are the tests whose status is not the same in every run, sorted: a
// test one run reports and another does not flips too. Runs whose log
// gave no statuses (no verdict: a timeout, an infrastructure error) are
// left out; their outcome differs anyway.
func Flips(runs []StatusMap) []string {
	var read []StatusMap
	for _, m := range runs {
		if len(m) > 0 {
			read = append(read, m)
		}
	}
	seen := map[string]bool{}
	var flips []string
	for _, m := range read {
		for name := range m {
			if seen[name] {
				continue
			}
			seen[name] = true
			for _, other := range read {
				if other[name] != m[name] {
					flips = append(flips, name)
					break
				}
			}
		}
	}
	sort.Strings(flips)
	return flips
}
