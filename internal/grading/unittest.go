package grading

import (
	"regexp"
	"strings"
	"sync"
)

// `python -m unittest -v` prints, per test, a header and a result:
//
//	test_ok (pkg.mod.Class.test_ok) ... ok                Python >= 3.11
//	test_ok (pkg.mod.Class) ... ok                        Python < 3.11
//	test_doc (pkg.mod.Class.test_doc)                     a docstring follows
//	First line of the docstring. ... FAIL
//	test_noisy (pkg.mod.Class.test_noisy) ... printed text ok
//	test_sub (pkg.mod.Class.test_sub) ...
//	  test_sub (pkg.mod.Class.test_sub) (i=1) ... FAIL    a failing subtest
//
// Results are "ok", "FAIL", "ERROR", "skipped 'reason'", "expected
// failure" and "unexpected success". ParseUnittest names each test by its
// dotted id, "pkg.mod.Class.test_ok", whatever the Python version or the
// docstring, so that lists written for one interpreter match logs of
// another. A failing subtest fails its test. Tests that never ran (a
// failing setUpClass) are not named in the log and so count as missing.
// This parser is not one of the harness's; it is for custom datasets.

var unittestHeader = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(\S+) \(([\w.]+)\)(?: \([^)]*\))?(?: \.\.\. ?(.*))?$`)
})

// ParseUnittest parses the verbose output of Python's unittest runner.
func ParseUnittest(log string) StatusMap {
	m := StatusMap{}
	set := func(id string, st Status) {
		// A failed subtest outranks the parent's own result line.
		if old, ok := m[id]; ok && (old == Failed || old == Error) && st == Passed {
			return
		}
		m[id] = st
	}
	pending := "" // a test whose result has not been printed yet
	for _, raw := range pyLines(log) {
		line := strings.TrimRight(raw, "\r")
		trimmed := strings.TrimSpace(line)
		if sm := unittestHeader().FindStringSubmatch(trimmed); sm != nil {
			id := unittestID(sm[1], sm[2])
			subtest := strings.Contains(trimmed, ") (")
			if !strings.Contains(trimmed, " ...") {
				pending = id // docstring line follows
				continue
			}
			if st, ok := unittestResult(sm[3]); ok {
				if subtest && st == Passed {
					continue
				}
				set(id, st)
				if !subtest {
					pending = ""
				}
				continue
			}
			if !subtest {
				pending = id // result comes later (output or subtests in between)
			}
			continue
		}
		if pending == "" {
			continue
		}
		// A docstring line, or output the test printed, ending in the result.
		text := trimmed
		if _, after, found := strings.Cut(text, " ... "); found {
			text = after
		} else if strings.HasSuffix(text, " ...") {
			continue
		}
		if st, ok := unittestResult(text); ok {
			set(pending, st)
			pending = ""
		}
	}
	// "FAIL: test_x (pkg.mod.Class.test_x)" headers after the run confirm failures.
	for _, raw := range pyLines(log) {
		line := strings.TrimSpace(raw)
		for _, p := range [...]struct {
			prefix string
			st     Status
		}{{"FAIL: ", Failed}, {"ERROR: ", Error}} {
			rest, found := strings.CutPrefix(line, p.prefix)
			if !found {
				continue
			}
			if sm := unittestHeader().FindStringSubmatch(rest); sm != nil && sm[3] == "" {
				id := unittestID(sm[1], sm[2])
				if !strings.HasSuffix(sm[2], "."+sm[1]) && !strings.HasPrefix(sm[1], "test") {
					continue // setUpClass, setUpModule: not a test
				}
				m[id] = p.st
			}
		}
	}
	return m
}

// unittestID returns "pkg.mod.Class.test_x" from the method name and the
// parenthesised part, in either Python's spelling.
func unittestID(method, paren string) string {
	if strings.HasSuffix(paren, "."+method) {
		return paren
	}
	return paren + "." + method
}

// unittestResult reads the result at the end of text, after any output the
// test printed on the same line.
func unittestResult(text string) (Status, bool) {
	text = strings.TrimSpace(text)
	switch {
	case text == "ok" || strings.HasSuffix(text, " ok"):
		return Passed, true
	case text == "FAIL" || strings.HasSuffix(text, " FAIL"):
		return Failed, true
	case text == "ERROR" || strings.HasSuffix(text, " ERROR"):
		return Error, true
	case text == "expected failure" || strings.HasSuffix(text, " expected failure"):
		return XFail, true
	case text == "unexpected success" || strings.HasSuffix(text, " unexpected success"):
		return Failed, true
	case strings.HasPrefix(text, "skipped"):
		return Skipped, true
	}
	if i := strings.LastIndex(text, " skipped "); i >= 0 && strings.HasSuffix(text, "'") {
		return Skipped, true
	}
	return "", false
}
