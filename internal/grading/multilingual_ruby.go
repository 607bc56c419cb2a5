package grading

// The harness's Ruby parsers (swebench log_parsers/ruby.py): minitest's
// verbose lines and cucumber's progress format (jekyll: which one depends
// on the instance, chosen by the spec), test-unit's verbose lines
// (fluentd, faker) and RSpec's JSON report turned into "name - passed"
// lines by the harness's test command (fastlane, fpm, rubocop).

func init() {
	registerMultilingual("minitest", ParseMinitest)
	registerMultilingual("cucumber", ParseCucumber)
	registerMultilingual("ruby_unit", ParseRubyUnit)
	registerMultilingual("rspec_transformed_json", ParseRSpecTransformedJSON)
}

var (
	minitestLine = pyRegexp(`^(.+)\. .*=.*(\.|F|E).*$`)
	cucumberLine = pyRegexp(`^(.*) \.+(\.|F)`)
	// rubyUnitLine: Python's "E\b" is an E not followed by a word
	// character; Go has no lookahead, so the submatch takes that character
	// (or the end) too, and the status is its first byte. Which lines
	// match and the name's submatch are unchanged.
	rubyUnitLine = pyRegexp(`^\s*(?:test: )?(.+):\s+(\.|[EFO](?:$|[^\p{L}\p{N}_]))`)
	rspecLine    = pyRegexp(`^(.+) - (passed|failed)`)
)

// ParseMinitest is the harness's parse_log_minitest.
func ParseMinitest(log string) StatusMap {
	return matchLines(log, minitestLine, true, byWord(1, 2, map[string]Status{".": Passed, "F": Failed, "E": Failed}))
}

// ParseCucumber is the harness's parse_log_cucumber (--format progress).
func ParseCucumber(log string) StatusMap {
	return matchLines(log, cucumberLine, true, byWord(1, 2, map[string]Status{".": Passed, "F": Failed}))
}

// ParseRubyUnit is the harness's parse_log_ruby_unit.
func ParseRubyUnit(log string) StatusMap {
	words := map[byte]Status{'.': Passed, 'E': Failed, 'F': Failed, 'O': Skipped}
	return matchLines(log, rubyUnitLine, true, func(m []string) (string, Status, bool) {
		return m[1], words[m[2][0]], true
	})
}

// ParseRSpecTransformedJSON is the harness's
// parse_log_rspec_transformed_json.
func ParseRSpecTransformedJSON(log string) StatusMap {
	return matchLines(log, rspecLine, true, byWord(1, 2, map[string]Status{"passed": Passed, "failed": Failed}))
}
