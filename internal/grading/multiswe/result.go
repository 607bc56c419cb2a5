package multiswe

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/minisandbox/msb/internal/dataset"
)

// Status is one test's status in one run, as the harness's report names it.
type Status string

// The statuses of Multi-SWE-bench's report.
const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	Skip Status = "SKIP"
	None Status = "NONE" // the run's log does not name the test
)

// set is a set of test names.
type set map[string]struct{}

func (s set) add(name string)      { s[name] = struct{}{} }
func (s set) has(name string) bool { _, ok := s[name]; return ok }
func (s set) remove(name string)   { delete(s, name) }
func newSet(names ...string) set {
	s := set{}
	for _, n := range names {
		s.add(n)
	}
	return s
}
func (s set) sorted() []string { return sortedNames(s) }

func sortedNames(s set) []string {
	out := make([]string, 0, len(s))
	for n := range s {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Result is one run's test names by status: what a parser reads from a
// log, or what a dataset row recorded. A valid Result names each test
// once (Check).
type Result struct {
	Passed, Failed, Skipped set
}

func newResult() Result { return Result{Passed: set{}, Failed: set{}, Skipped: set{}} }

// ResultOf converts a recorded run of a dataset row.
func ResultOf(r *dataset.RunResult) Result {
	if r == nil {
		return newResult()
	}
	return Result{Passed: newSet(r.Passed...), Failed: newSet(r.Failed...), Skipped: newSet(r.Skipped...)}
}

// ErrConflict: a parser gave one test two statuses. The harness's
// TestResult refuses such a result (a ValueError), so the run has no report.
var ErrConflict = errors.New("a test has two statuses")

// Check refuses a result that names a test under two statuses.
func (r Result) Check() error {
	for _, p := range []struct {
		a, b   set
		na, nb string
	}{{r.Passed, r.Failed, "passed", "failed"}, {r.Passed, r.Skipped, "passed", "skipped"}, {r.Failed, r.Skipped, "failed", "skipped"}} {
		var both []string
		for n := range p.a {
			if p.b.has(n) {
				both = append(both, n)
			}
		}
		if len(both) > 0 {
			sort.Strings(both)
			return fmt.Errorf("%w: %s and %s: %s", ErrConflict, p.na, p.nb, strings.Join(both, ", "))
		}
	}
	return nil
}

// Status is the test's status in this run.
func (r Result) Status(name string) Status {
	switch {
	case r.Passed.has(name):
		return Pass
	case r.Failed.has(name):
		return Fail
	case r.Skipped.has(name):
		return Skip
	}
	return None
}

// Count is the number of tests the run names.
func (r Result) Count() int { return len(r.Passed) + len(r.Failed) + len(r.Skipped) }

// Statuses maps every test of the run to its status (for a result that
// fails Check, the last of passed, failed, skipped wins, as in the harness).
func (r Result) Statuses() map[string]Status {
	m := make(map[string]Status, r.Count())
	for _, s := range []struct {
		names set
		st    Status
	}{{r.Passed, Pass}, {r.Failed, Fail}, {r.Skipped, Skip}} {
		for n := range s.names {
			m[n] = s.st
		}
	}
	return m
}
