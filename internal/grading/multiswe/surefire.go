package multiswe

import (
	"strings"
	"unicode/utf8"
)

// Maven Surefire: the harness's parsers of jackson-core and gson. Both
// grade a test class by its summary line "Tests run: R, Failures: F,
// Errors: E, Skipped: S, Time elapsed: ...": passed when R > 0, F = E = 0
// and S != R; failed when F > 0 or E > 0; skipped when S = R (and nothing
// else: a line with R = 0 and S = 0 counts as skipped).

// classStatus is the harness's verdict on one summary line's counts
// (canonical decimal strings, see pyInt).
func classStatus(run, failures, errs, skipped string) Status {
	switch {
	case run != "0" && failures == "0" && errs == "0" && skipped != run:
		return Pass
	case failures != "0" || errs != "0":
		return Fail
	case skipped == run:
		return Skip
	}
	return None
}

func (r Result) addClass(name string, st Status) {
	switch st {
	case Pass:
		r.Passed.add(name)
	case Fail:
		r.Failed.add(name)
	case Skip:
		r.Skipped.add(name)
	}
}

// jackson-core's: after ANSI colour codes are removed, any line holding
// the summary followed by " in <class>" (surefire 2.22 and later) names
// the class.
var (
	ansiColour     = pyRegexp(`\x1B\[[0-?9;]*[mK]`)
	surefireInLine = pyRegexp(`Tests run: (\d+), Failures: (\d+), Errors: (\d+), Skipped: (\d+), Time elapsed: [\d.]+ .+? in (.+)`)
)

// ParseSurefire reads mvn test's output as jackson-core's harness does.
func ParseSurefire(log string) (Result, error) {
	r := newResult()
	log = ansiColour.ReplaceAllString(log, "")
	for _, line := range pySplitLines(log) {
		if m := surefireInLine.FindStringSubmatch(line); m != nil {
			r.addClass(m[5], classStatus(pyInt(m[1]), pyInt(m[2]), pyInt(m[3]), pyInt(m[4])))
		}
	}
	return r, nil
}

// gson's: the class is named by an earlier "Running <class>" (older
// surefire), and its summary is the first later line that starts with
// "Tests run:" and spells the counts with "sec" after the time; a summary
// that also ends "sec <<< FAILURE!" right under the Running line fails the
// class whatever its counts. Both searches start at the log's ninth
// character: the harness passes re.MULTILINE (8) where findall takes the
// start position.
var (
	surefireSummary = pyRegexp(`^Tests run:\s*(\d+),\s*Failures:\s*(\d+),\s*Errors:\s*(\d+),\s*Skipped:\s*(\d+),\s*Time elapsed:\s*[\d.]+\s*sec`)
	surefireFailure = pyRegexp(`Running (.+?)\nTests run: (\d+), Failures: (\d+), Errors: (\d+), Skipped: (\d+), Time elapsed: [\d.]+ sec +<<< FAILURE!`)
)

// gsonStart is where the harness's searches start: code point 8.
const gsonStart = 8

// ParseSurefireRunning reads mvn test's output as gson's harness does.
func ParseSurefireRunning(log string) (Result, error) {
	r := newResult()
	start := runeOffset(log, gsonStart)
	for pos := start; pos < len(log); {
		i := strings.Index(log[pos:], "Running")
		if i < 0 {
			break
		}
		at := pos + i
		name, counts, end, ok := runningClass(log, at)
		if !ok {
			pos = at + 1
			continue
		}
		r.addClass(name, classStatus(counts[0], counts[1], counts[2], counts[3]))
		pos = end
	}
	for _, m := range surefireFailure.FindAllStringSubmatch(log[start:], -1) {
		r.Failed.add(m[1])
	}
	return r, nil
}

// runningClass matches, at log[at:] (which starts "Running"), the
// harness's pattern
//
//	Running\s+(.+?)\s*\n(?:(?!Tests run:).*\n)*Tests run:\s*(\d+),...sec
//
// without the look-ahead Go lacks, trying what Python's backtracking
// tries in its order: the whitespace after "Running" longest first; the
// class name from there to the end of its line, without trailing
// whitespace but at least one character (so after "Running\n\r\n" the
// name can be "\r"); then the lines after it are skipped up to the first
// that starts "Tests run:", which must hold the summary. It returns the
// name, the four counts, and where the match ends.
func runningClass(log string, at int) (name string, counts [4]string, end int, ok bool) {
	p := at + len("Running")
	var starts []int // where the name may start, after 1, 2, ... whitespace characters
	for q := p; q < len(log); {
		r, n := utf8.DecodeRuneInString(log[q:])
		if !isPySpace(r) {
			break
		}
		q += n
		starts = append(starts, q)
	}
	for k := len(starts) - 1; k >= 0; k-- {
		q := starts[k]
		if q >= len(log) || log[q] == '\n' {
			continue
		}
		nl := strings.IndexByte(log[q:], '\n')
		if nl < 0 {
			continue
		}
		name = strings.TrimRightFunc(log[q:q+nl], isPySpace)
		if name == "" {
			_, n := utf8.DecodeRuneInString(log[q:])
			name = log[q : q+n]
		}
		if counts, end, ok = summaryAfter(log, q+nl+1); ok {
			return name, counts, end, true
		}
	}
	return "", counts, 0, false
}

// summaryAfter finds, from the line starting at line, the first line that
// starts "Tests run:" and reads its summary.
func summaryAfter(log string, line int) (counts [4]string, end int, ok bool) {
	for line <= len(log) {
		rest := log[line:]
		if strings.HasPrefix(rest, "Tests run:") {
			m := surefireSummary.FindStringSubmatchIndex(rest)
			if m == nil {
				return counts, 0, false
			}
			for k := range counts {
				counts[k] = pyInt(rest[m[2+2*k]:m[3+2*k]])
			}
			return counts, line + m[1], true
		}
		next := strings.IndexByte(rest, '\n')
		if next < 0 {
			return counts, 0, false
		}
		line += next + 1
	}
	return counts, 0, false
}
