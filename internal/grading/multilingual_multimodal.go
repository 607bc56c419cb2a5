package grading

import (
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/minisandbox/msb/internal/grading/pyre"
)

// The JavaScript parsers of SWE-bench Multimodal's repositories, which
// share the swebench package's JavaScript parser table with SWE-bench
// Multilingual's (log_parsers/javascript.py): wp-calypso's Jest runs,
// Chart.js's and p5.js's Karma/Mocha failures, marked's failure list and
// react-pdf's per-file Jest lines. The 5.x additions to that table
// (highlight.js, prism, eslint, bpmn-js, plotly, openlayers, emotion,
// grommet, next, cypress, carbon, lighthouse, quarto, prettier,
// scratch-gui) are not ported.

func init() {
	registerMultilingual("calypso", ParseCalypso)
	registerMultilingual("chart_js", ParseChartJS)
	registerMultilingual("marked", ParseMarked)
	registerMultilingual("react_pdf", ParseReactPDF)
	registerMultilingual("p5js", ParseP5js)
}

// ansiEscape is the harness's ansi_escape pattern.
var ansiEscape = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\x1b(?:[@-Z\\-_]|\[[0-?]*[ -/]*[@-~])`)
})

// pySpaceNoNewline is Python's [^\S\r\n]: whitespace but a line end.
const pySpaceNoNewline = `[\t\v\f\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]`

var (
	calypsoTiming = pyRegexp(`\(\d+ms\)`)
	calypsoPass   = [2]*pyPattern{pyRegexp(`^\s+✓\s(.*)`), pyRegexp(`^\s+✓\s(.*)\(\d+ms\)$`)}
	calypsoFail   = [2]*pyPattern{pyRegexp(`^\s+✕\s(.*)`), pyRegexp(`^\s+✕\s(.*)\(\d+ms\)$`)}
	chartJSFailed = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?m)Chrome[` + pyre.Space + `][\p{Nd}.]+` + pySpaceNoNewline + `\(.+?\)` + pySpaceNoNewline + `(.*)FAILED$`)
	})
	markedFailed = pyRegexp(`^\d+\)\s(.*)`)
	p5jsFail     = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?ms)^[` + pyre.Space + `]*(\p{Nd}+)\)(.{0,1000}?):`)
	})
)

// calypsoSuite is an open describe block of a calypso log and its indent.
type calypsoSuite struct {
	name   string
	indent int
}

// ParseCalypso is the harness's parse_log_calypso: the log after each
// " ./node_modules/.bin/jest " up to its summary; indented lines open
// describe blocks, "✓ name" and "✕ name" are tests named with the blocks
// joined by " - ". Where the harness's parser would raise (a mark line its
// pattern does not match), this one skips the line.
func ParseCalypso(log string) StatusMap {
	out := StatusMap{}
	var suite []calypsoSuite
	chunks := strings.Split(universalNewlines(log), " ./node_modules/.bin/jest ")
	for _, chunk := range chunks[1:] {
		for _, line := range strings.Split(chunk, "\n") {
			if strings.HasPrefix(line, "Test Suites") || strings.HasPrefix(line, "  ● ") {
				break
			}
			stripped := pyStrip(line)
			if mark, st := calypsoMark(stripped); mark != nil {
				p := mark[0]
				if calypsoTiming.FindStringSubmatch(line) != nil {
					p = mark[1]
				}
				if m := p.FindStringSubmatch(line); m != nil {
					names := make([]string, len(suite))
					for i, s := range suite {
						names[i] = s.name
					}
					out[pyStrip(strings.Join(names, " - ")+" - "+m[1])] = st
				}
				continue
			}
			indent := pyLen(line) - pyLen(strings.TrimLeftFunc(line, isPySpace))
			if indent == 0 {
				continue
			}
			for len(suite) > 0 && suite[len(suite)-1].indent >= indent {
				suite = suite[:len(suite)-1]
			}
			suite = append(suite, calypsoSuite{stripped, indent})
		}
	}
	return out
}

// calypsoMark returns the patterns (without and with a timing) and the
// status of a stripped line that starts with a test's mark.
func calypsoMark(stripped string) (*[2]*pyPattern, Status) {
	switch {
	case strings.HasPrefix(stripped, "✓"):
		return &calypsoPass, Passed
	case strings.HasPrefix(stripped, "✕"):
		return &calypsoFail, Failed
	}
	return nil, ""
}

// ParseChartJS is the harness's parse_log_chart_js: failures only.
func ParseChartJS(log string) StatusMap {
	out := StatusMap{}
	log = ansiEscape().ReplaceAllString(universalNewlines(log), "")
	for _, m := range chartJSFailed().FindAllStringSubmatch(log, -1) {
		out[m[1]] = Failed
	}
	return out
}

// ParseMarked is the harness's parse_log_marked: "1) name" lines are
// failures; nothing else is recorded.
func ParseMarked(log string) StatusMap {
	out := StatusMap{}
	for _, line := range pyLines(log) {
		if m := markedFailed.FindStringSubmatch(line); m != nil {
			out[pyStrip(m[1])] = Failed
		}
	}
	return out
}

// reactPDFLines are the harness's react-pdf patterns, tried in order.
var reactPDFLines = []struct {
	re *pyPattern
	st Status
}{
	{pyRegexp(`^PASS\s(.*)\s\([\d.]+ms\)`), Passed},
	{pyRegexp(`^PASS\s(.*)\s\([\d.]+\ss\)`), Passed},
	{pyRegexp(`^PASS\s(.*)\s\([\d.]+s\)`), Passed},
	{pyRegexp(`^PASS\s(.*)`), Passed},
	{pyRegexp(`^FAIL\s(.*)\s\([\d.]+ms\)`), Failed},
	{pyRegexp(`^FAIL\s(.*)\s\([\d.]+\ss\)`), Failed},
	{pyRegexp(`^FAIL\s(.*)\s\([\d.]+s\)`), Failed},
	{pyRegexp(`^FAIL\s(.*)`), Failed},
}

// ParseReactPDF is the harness's parse_log_react_pdf.
func ParseReactPDF(log string) StatusMap {
	out := StatusMap{}
	for _, line := range pyLines(log) {
		for _, p := range reactPDFLines {
			if m := p.re.FindStringSubmatch(line); m != nil {
				out[m[1]] = p.st
				break
			}
		}
	}
	return out
}

// ParseP5js is the harness's parse_log_p5js: with colour codes, JSON
// blocks and XML elements taken out, each "N) a\n   b:" whose lines are
// ever more indented is a failed test "a:b". Nothing else is recorded.
func ParseP5js(log string) StatusMap {
	out := StatusMap{}
	log = ansiEscape().ReplaceAllString(universalNewlines(log), "")
	log = removeXMLBlocks(removeJSONBlocks(log))
	for _, m := range p5jsFail().FindAllStringSubmatch(log, -1) {
		lines := strings.Split(m[2], "\n")
		if !indentsGrow(lines) {
			continue
		}
		for i, l := range lines {
			lines[i] = pyStrip(l)
		}
		out[strings.Join(lines, ":")] = Failed
	}
	return out
}

// indentsGrow reports whether each line is indented deeper than the one
// before it, the first deeper than zero.
func indentsGrow(lines []string) bool {
	last := 0
	for _, l := range lines {
		n := pyLen(l) - pyLen(strings.TrimLeftFunc(l, isPySpace))
		if n <= last {
			return false
		}
		last = n
	}
	return true
}

// removeJSONBlocks drops the lines of multi-line JSON objects and arrays
// (from a line ending "{" or "[" to a line that is just "}" or "]") and
// one-line ones, as the harness's remove_json_blocks does.
func removeJSONBlocks(log string) string {
	var kept []string
	inObject, inList := false, false
	for _, line := range strings.Split(log, "\n") {
		s := strings.TrimRightFunc(line, isPySpace)
		switch {
		case strings.HasSuffix(s, "{"):
			inObject = true
			continue
		case strings.HasSuffix(s, "["):
			inList = true
			continue
		case s == "}" && inObject:
			inObject = false
			continue
		case s == "]" && inList:
			inList = false
			continue
		case inObject || inList:
			continue
		case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}"),
			strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"):
			continue
		}
		kept = append(kept, line)
	}
	return strings.Join(kept, "\n")
}

// removeXMLBlocks takes out, again and again, the leftmost "<tag>...</tag>"
// (the first closing tag after the opening one), leaving one "<tag>" for
// each further "<tag>" inside it, as the harness's remove_xml_blocks does
// with the pattern <(\w+)>[\s\S]*?<\/\1>, which Go's regexp cannot write.
func removeXMLBlocks(log string) string {
	for {
		start, end, tag := firstXMLBlock(log)
		if start < 0 {
			return log
		}
		open := "<" + tag + ">"
		n := max(strings.Count(log[start:end], open)-1, 0)
		log = log[:start] + strings.Repeat(open, n) + log[end:]
	}
}

// firstXMLBlock finds the leftmost "<tag>" (tag all word characters) that
// a "</tag>" follows, and returns the block's span.
func firstXMLBlock(log string) (start, end int, tag string) {
	for i := 0; i < len(log); i++ {
		if log[i] != '<' {
			continue
		}
		j := i + 1
		for j < len(log) {
			r, size := utf8.DecodeRuneInString(log[j:])
			if !isPyWord(r) {
				break
			}
			j += size
		}
		if j == i+1 || j >= len(log) || log[j] != '>' {
			continue
		}
		tag = log[i+1 : j]
		if k := strings.Index(log[j+1:], "</"+tag+">"); k >= 0 {
			return i, j + 1 + k + len(tag) + 3, tag
		}
	}
	return -1, -1, ""
}

// isPyWord reports whether Python's \w matches r.
func isPyWord(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) }
