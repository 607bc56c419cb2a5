package grading

import (
	"regexp"
	"strings"
	"sync"
)

// Django's runner (tests/runtests.py --verbosity 2) prints unittest's
// verbose lines:
//
//	test_name (module.Class) ... ok                 Python < 3.11
//	test_name (module.Class.test_name) ... ok       Python >= 3.11
//	First line of the test's docstring ... FAIL     when the test has one
//	test_name (module.Class) ... skipped 'reason'
//	test_name (module.Class) ... output the test printed
//	ok                                              result on a later line
//
// and, after the run, "FAIL: test_name (module.Class)" and
// "ERROR: test_name (module.Class)" headers. The test's name is the text
// before " ... ", exactly as the dataset lists spell it (docstring lines
// included); the headers record the bare method name.

// pyS is Python's \s for str patterns, as far as a log can contain it.
const pyS = `[\t\n\v\f\r \x{1c}-\x{1f}\x{85}\x{a0}\p{Zs}\x{2028}\x{2029}]`

// djangoInterrupted matches results that another print split from their
// test line; the harness knows these three forms.
// They are compiled on first use, not at start-up.
var djangoInterrupted = sync.OnceValue(func() []*regexp.Regexp {
	return []*regexp.Regexp{
		regexp.MustCompile(`(?m)^(.*?)` + pyS + `\.\.\.` + pyS + `Testing against Django installed in (?s:.*?) silenced\)\.\nok$`),
		regexp.MustCompile(`(?m)^(.*?)` + pyS + `\.\.\.` + pyS + `Internal Server Error: /(.*)/\nok$`),
		regexp.MustCompile(`(?m)^(.*?)` + pyS + `\.\.\.` + pyS + `System check identified no issues \(0 silenced\)\nok$`),
	}
})

// ParseDjango is the harness's parse_log_django. Like the harness it does
// not record "... expected failure" or "... unexpected success": such a
// test is missing from the map and grades as failed. (Recording an
// expected failure as XFAIL would grade it as passing, and a patch that
// marks a listed test @expectedFailure would then be rewarded where the
// harness does not reward it.)
func ParseDjango(log string) StatusMap {
	m := StatusMap{}
	log = universalNewlines(log)
	prev, havePrev := "", false
	for _, line := range pyLines(log) {
		line = pyStrip(line)

		if strings.Contains(line, "--version is equivalent to version") {
			m["--version is equivalent to version"] = Passed
		}
		if before, _, found := strings.Cut(line, " ... "); found {
			prev, havePrev = before, true
		}
		for _, suffix := range [...]string{" ... ok", " ... OK", " ...  OK"} {
			if !strings.HasSuffix(line, suffix) {
				continue
			}
			// django__django-7188: a migration's progress line and the
			// test's share a line.
			if strings.HasPrefix(line, "Applying sites.0002_alter_domain_unique...test_no_migrations") {
				_, after, _ := strings.Cut(line, "...")
				line = pyStrip(after)
			}
			m[line[:strings.LastIndex(line, suffix)]] = Passed
			break
		}
		if before, _, found := strings.Cut(line, " ... skipped"); found {
			m[before] = Skipped
		}
		if strings.HasSuffix(line, " ... FAIL") {
			before, _, _ := strings.Cut(line, " ... FAIL")
			m[before] = Failed
		}
		if strings.HasPrefix(line, "FAIL:") {
			if f := pyFields(line); len(f) >= 2 {
				m[f[1]] = Failed
			}
		}
		if strings.HasSuffix(line, " ... ERROR") {
			before, _, _ := strings.Cut(line, " ... ERROR")
			m[before] = Error
		}
		if strings.HasPrefix(line, "ERROR:") {
			if f := pyFields(line); len(f) >= 2 {
				m[f[1]] = Error
			}
		}
		if strings.HasPrefix(line, "ok") && havePrev {
			m[prev] = Passed
		}
	}
	for _, re := range djangoInterrupted() {
		for _, sm := range re.FindAllStringSubmatch(log, -1) {
			m[sm[1]] = Passed
		}
	}
	return m
}
