package multiswe

import (
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// The harness's parsers are Python; these helpers give Go the same notions
// of a line (str.splitlines), of whitespace (str.strip, the regular
// expression classes \s and \S) and of a digit (\d, int()) so that a test
// name is cut where the harness cuts it.

// pySpace is Python's whitespace (str.isspace, and \s in a str pattern) as
// the body of a regular expression character class.
const pySpace = `\t\n\v\f\r \x{1c}-\x{1f}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}`

// pyRegexp compiles a pattern written with Python's \s, \S, \d and \w and gives
// those classes their Unicode meaning in Python. (Go's are ASCII-only.)
// Inside a bracket expression only \d is allowed. It compiles on first
// use: the Unicode classes make large programs, and the commands that never
// grade a Multi-SWE-bench row (msb run) should not build them at start-up.
func pyRegexp(pattern string) *pyPattern {
	return &pyPattern{compiled: sync.OnceValue(func() *regexp.Regexp {
		r := strings.NewReplacer(`\s`, "["+pySpace+"]", `\S`, "[^"+pySpace+"]", `\d`, `\p{Nd}`, `\w`, `[\p{L}\p{N}_]`)
		return regexp.MustCompile(r.Replace(pattern))
	})}
}

// pyPattern is a pattern of pyRegexp, compiled on its first match. Its
// methods are regexp.Regexp's.
type pyPattern struct{ compiled func() *regexp.Regexp }

func (p *pyPattern) FindStringSubmatch(s string) []string {
	return p.compiled().FindStringSubmatch(s)
}

func (p *pyPattern) FindStringSubmatchIndex(s string) []int {
	return p.compiled().FindStringSubmatchIndex(s)
}

func (p *pyPattern) FindAllStringSubmatch(s string, n int) [][]string {
	return p.compiled().FindAllStringSubmatch(s, n)
}

func (p *pyPattern) ReplaceAllString(src, repl string) string {
	return p.compiled().ReplaceAllString(src, repl)
}

// isPySpace reports whether Python's str.isspace calls r whitespace.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// pyStrip is Python's str.strip() with no arguments.
func pyStrip(s string) string { return strings.TrimFunc(s, isPySpace) }

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
