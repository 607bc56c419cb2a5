package multiswe

import (
	"strings"
)

// ctest: the harness's parsers of fmt and Catch2.
//
// fmt's: a line, stripped, "<i>/<n> Test #<k>: <name> .... Passed" passed
// (anything may follow), one ending "...***Failed" failed; the name loses
// the spaces around it.
//
// Catch2's reads the line stripped and lower-cased, so its names are lower
// case: "<i>/<n> Test #<k>: <name> ... Passed <time>" passed and
// "...***Failed <time>" failed, and cmake's configure checks count too:
// "-- Performing Test <name> - Success" passed, "- Failed" failed,
// "- skipped" was skipped.
var (
	fmtPass = pyRegexp(`^\d+/\d+\s*Test\s*#\d+:\s*(.*?)\s*\.+\s*Passed`)
	fmtFail = pyRegexp(`^\d+/\d+\s*Test\s*#\d+:\s*(.*?)\s*\.+\s*\*+Failed$`)

	catch2Pass = []*pyPattern{
		pyRegexp(`(?i)^-- Performing Test (.+) - Success$`),
		pyRegexp(`(?i)^\d+/\d+ Test\s+#\d+: (.+) \.+\s+ Passed\s+.+$`),
	}
	catch2Fail = []*pyPattern{
		pyRegexp(`(?i)^-- Performing Test (.+) - Failed$`),
		pyRegexp(`(?i)^\d+/\d+ Test\s+#\d+: (.+) \.+\*\*\*Failed\s+.+$`),
	}
	catch2Skip = []*pyPattern{pyRegexp(`(?i)^-- Performing Test (.+) - skipped$`)}
)

// ParseCTestFmt reads ctest's output as fmt's harness does.
func ParseCTestFmt(log string) (Result, error) {
	r := newResult()
	for _, line := range pySplitLines(log) {
		line = pyStrip(line)
		if m := fmtPass.FindStringSubmatch(line); m != nil {
			r.Passed.add(m[1])
		}
		if m := fmtFail.FindStringSubmatch(line); m != nil {
			r.Failed.add(m[1])
		}
	}
	return r, nil
}

// ParseCTestCatch2 reads cmake's and ctest's output as Catch2's harness does.
func ParseCTestCatch2(log string) (Result, error) {
	r := newResult()
	for _, line := range pySplitLines(log) {
		line = pyLower(pyStrip(line))
		for _, rs := range []struct {
			res []*pyPattern
			to  set
		}{{catch2Pass, r.Passed}, {catch2Fail, r.Failed}, {catch2Skip, r.Skipped}} {
			for _, re := range rs.res {
				if m := re.FindStringSubmatch(line); m != nil {
					rs.to.add(m[1])
				}
			}
		}
	}
	return r, nil
}

// pyLower is Python's str.lower() for the cases Go's strings.ToLower
// spells otherwise: U+0130 becomes "i" and a combining dot above. (The
// final-sigma rule is not reproduced: Σ always becomes σ.)
func pyLower(s string) string {
	return strings.ToLower(strings.ReplaceAll(s, "\u0130", "i\u0307"))
}
