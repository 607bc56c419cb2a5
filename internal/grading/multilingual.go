package grading

import (
	"unicode/utf8"

	"github.com/minisandbox/msb/internal/grading/pyre"
)

// SWE-bench Multilingual's parsers (swebench 5.0.2's
// harness/log_parsers/<language>.py, MAP_REPO_TO_PARSER for C/C++, Go,
// Java, JavaScript/TypeScript, PHP, Ruby and Rust) live in one file per
// language, multilingual_<language>.go, each registered under the harness
// function's name without its "parse_log_" prefix (gotest, cargo, maven,
// jest, ...). Like the Python ports, they reproduce the harness's quirks:
// the datasets' FAIL_TO_PASS and PASS_TO_PASS lists were made by them.
// TestMultilingualParsersMatchHarness runs each against the package's own
// function. The harness's two dispatchers that choose a parser by instance
// id (parse_log_jekyll, parse_log_immutable_js) are not parsers here: the
// built-in spec of such a row names the parser they would choose
// (spec.MultilingualBuiltin).

// multilingualParsers are the ports, by the harness's name.
var multilingualParsers = map[string]ParseFunc{}

// registerMultilingual records a port in multilingualParsers and in the
// parser registry.
func registerMultilingual(name string, p ParseFunc) {
	multilingualParsers[name] = p
	RegisterParser(name, p)
}

// MultilingualParserNames lists the ports' names in sorted order.
func MultilingualParserNames() []string {
	var names []string
	for _, n := range ParserNames() {
		if _, ok := multilingualParsers[n]; ok {
			names = append(names, n)
		}
	}
	return names
}

// pyRegexp and pyPattern are package pyre's: the harness's patterns with
// Python's classes, compiled on first use.
var pyRegexp = pyre.Lazy

type pyPattern = pyre.Pattern

// matchLines is the loop most of the harness's parsers are: for each line
// of the log (stripped of whitespace as Python's str.strip does when strip
// is set), re.match against pattern; status turns the submatches into a
// test name and status, or ok false to record nothing.
func matchLines(log string, pattern *pyPattern, strip bool, status func(m []string) (name string, st Status, ok bool)) StatusMap {
	out := StatusMap{}
	for _, line := range pyLines(log) {
		if strip {
			line = pyStrip(line)
		}
		m := pattern.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if name, st, ok := status(m); ok {
			out[name] = st
		}
	}
	return out
}

// byWord maps a status word of a log to a Status; the name is submatch
// nameAt and the word submatch wordAt.
func byWord(nameAt, wordAt int, words map[string]Status) func(m []string) (string, Status, bool) {
	return func(m []string) (string, Status, bool) {
		st, ok := words[m[wordAt]]
		return m[nameAt], st, ok
	}
}

// pyLen is Python's len of a str: code points, not bytes.
func pyLen(s string) int { return utf8.RuneCountInString(s) }
