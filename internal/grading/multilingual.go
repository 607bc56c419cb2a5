package grading

import (
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
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

// pySpace is the set of runes Python's str.isspace and the \s of a str
// pattern accept, as the body of a character class.
const pySpace = `\t\n\v\f\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}`

// pyClasses gives \s, \S, \w and \d their meaning in Python's str
// patterns (Unicode), which Go's regexp gives in ASCII only.
var pyClasses = strings.NewReplacer(
	`\s`, `[`+pySpace+`]`,
	`\S`, `[^`+pySpace+`]`,
	`\w`, `[\p{L}\p{N}_]`,
	`\d`, `\p{Nd}`,
)

// pyRegexp compiles a pattern written as the harness wrote it. It must not
// use \s, \S, \w or \d inside a character class. Go's leftmost-first
// matching chooses the submatches a backtracking engine such as Python's
// chooses, so greedy and lazy groups capture the same text. It compiles on
// first use: the Unicode classes make large programs, which commands that
// grade nothing (msb run) should not build at start-up.
func pyRegexp(expr string) *pyPattern {
	return &pyPattern{compiled: sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(pyClasses.Replace(expr))
	})}
}

// pyPattern is a pattern of pyRegexp, compiled on its first match. Its
// methods are regexp.Regexp's.
type pyPattern struct{ compiled func() *regexp.Regexp }

func (p *pyPattern) FindStringSubmatch(s string) []string {
	return p.compiled().FindStringSubmatch(s)
}

func (p *pyPattern) ReplaceAllString(src, repl string) string {
	return p.compiled().ReplaceAllString(src, repl)
}

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
