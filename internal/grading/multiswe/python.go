package multiswe

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/minisandbox/msb/internal/grading/pyre"
)

// The harness's parsers are Python; these helpers give Go the same notions
// of a line (str.splitlines), of whitespace (str.strip, the regular
// expression classes \s and \S) and of a digit (\d, int()) so that a test
// name is cut where the harness cuts it.

// pyRegexp, pyPattern, isPySpace and pyStrip are package pyre's.
var (
	pyRegexp  = pyre.Lazy
	isPySpace = pyre.IsSpace
	pyStrip   = pyre.Strip
)

type pyPattern = pyre.Pattern

// isLineBreak reports whether str.splitlines breaks a line at r.
func isLineBreak(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
		return true
	}
	return false
}

// pySplitLines is Python's str.splitlines(): "\r\n" is one break, and a
// break at the very end yields no empty last line.
func pySplitLines(s string) []string {
	var lines []string
	start := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isLineBreak(r) {
			i += n
			continue
		}
		lines = append(lines, s[start:i])
		i += n
		if r == '\r' && i < len(s) && s[i] == '\n' {
			i++
		}
		start = i
	}
	if start < len(s) {
		lines = append(lines, s[start:])
	}
	return lines
}

// pyInt is Python's int() of a run of decimal digits (any script's), as a
// canonical decimal string: no leading zeros, "0" for zero. Comparing
// these strings compares the numbers, however large.
func pyInt(digits string) string {
	var b strings.Builder
	for _, r := range digits {
		d := digitValue(r)
		if b.Len() == 0 && d == 0 {
			continue
		}
		b.WriteByte(byte('0' + d))
	}
	if b.Len() == 0 {
		return "0"
	}
	return b.String()
}

// digitValue is the value of a decimal digit (Unicode category Nd). Every
// script's digits 0 to 9 are consecutive code points, and runs of them
// that touch (as the mathematical digits do) start at multiples of ten
// from the first.
func digitValue(r rune) int {
	first := r
	for unicode.IsDigit(first - 1) {
		first--
	}
	return int(r-first) % 10
}

// runeOffset is the byte offset of the n-th code point of s (len(s) when
// s is shorter): Python's string positions count code points.
func runeOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}
