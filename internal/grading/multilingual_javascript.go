package grading

import "strings"

// The harness's JavaScript and TypeScript parsers of SWE-bench
// Multilingual's repositories (swebench 5.0.2 log_parsers/javascript.py):
// Jest --verbose (babel, docusaurus, immutable-js 2006), Jest's JSON turned
// into "[PASSED] name" lines (immutable-js 2005), Vitest's verbose reporter
// (vuejs/core), TAP (three.js, axios) and Karma's spec reporter (preact).
// The file's parsers for SWE-bench Multimodal's repositories are in
// multilingual_multimodal.go.

func init() {
	registerMultilingual("jest", ParseJest)
	registerMultilingual("jest_json", ParseJestJSON)
	registerMultilingual("vitest", ParseVitest)
	registerMultilingual("tap", ParseTAP)
	registerMultilingual("karma", ParseKarma)
}

var (
	jestLine     = pyRegexp(`^\s*(✓|✕|○)\s(.+?)(?:\s\((\d+\s*m?s)\))?$`)
	jestJSONLine = pyRegexp(`^\[(PASSED|FAILED)\]\s(.+)$`)
	vitestLine   = pyRegexp(`^\s*(✓|×|↓)\s(.+?)(?:\s(\d+\s*m?s?|\[skipped\]))?$`)
	tapLine      = pyRegexp(`^(ok|not ok) (\d+) (.+)$`)
	karmaLine    = pyRegexp(`^(\s*)?([✔✖])?\s(.*)$`)
)

// ParseJest is the harness's parse_log_jest (5.x: the name is stripped).
func ParseJest(log string) StatusMap {
	words := map[string]Status{"✓": Passed, "✕": Failed, "○": Skipped}
	return matchLines(log, jestLine, true, func(m []string) (string, Status, bool) {
		return pyStrip(m[2]), words[m[1]], true
	})
}

// ParseJestJSON is the harness's parse_log_jest_json.
func ParseJestJSON(log string) StatusMap {
	return matchLines(log, jestJSONLine, true, byWord(2, 1, map[string]Status{"PASSED": Passed, "FAILED": Failed}))
}

// ParseVitest is the harness's parse_log_vitest.
func ParseVitest(log string) StatusMap {
	return matchLines(log, vitestLine, true, byWord(2, 1, map[string]Status{"✓": Passed, "×": Failed, "↓": Skipped}))
}

// ParseTAP is the harness's parse_log_tap.
func ParseTAP(log string) StatusMap {
	return matchLines(log, tapLine, true, byWord(3, 1, map[string]Status{"ok": Passed, "not ok": Failed}))
}

// ParseKarma is the harness's parse_log_karma: after "Starting browser"
// and before "SUMMARY:", an indented line without a mark opens a describe
// block when it is indented deeper than the last one and closes one when
// less deep; "✔ name" and "✖ name" are tests, named with the open blocks
// joined by " > ". Where the harness's parser would close a block none is
// open, it raises (IndexError); this one goes on.
func ParseKarma(log string) StatusMap {
	out := StatusMap{}
	indent := -1
	var suite []string
	started := false
	for _, line := range pyLines(log) {
		if strings.HasPrefix(line, "SUMMARY:") {
			return out
		}
		if strings.Contains(line, "Starting browser") {
			started = true
			continue
		}
		if !started {
			continue
		}
		m := karmaLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		lead, mark, name := m[1], m[2], m[3]
		if lead != "" && mark == "" {
			switch n := pyLen(lead); {
			case n > indent:
				indent = n
				suite = append(suite, name)
			case n < indent:
				indent = n
				if len(suite) > 0 {
					suite = suite[:len(suite)-1]
				}
				continue
			}
		}
		switch mark {
		case "✔":
			out[strings.Join(append(suite[:len(suite):len(suite)], name), " > ")] = Passed
		case "✖":
			out[strings.Join(append(suite[:len(suite):len(suite)], name), " > ")] = Failed
		}
	}
	return out
}
