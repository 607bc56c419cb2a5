// Package pyre gives Go what the harnesses' Python log parsers mean by a
// pattern and by whitespace, so that a test name is cut where the harness
// cuts it. A Pattern is a regular expression written as the harness wrote
// it, with \s, \S, \w and \d in the Unicode meaning of Python's str
// patterns (Go's are ASCII-only), compiled on its first use: the Unicode
// classes make large programs, which commands that grade nothing (msb run)
// should not build at start-up. Go's leftmost-first matching chooses the
// submatches a backtracking engine such as Python's chooses, so greedy and
// lazy groups capture the same text.
package pyre

import (
	"regexp"
	"strings"
	"sync"
	"unicode"
)

// Space is the set of runes Python's str.isspace and the \s of a str
// pattern accept, as the body of a character class.
const Space = `\t\n\v\f\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}`

var classes = strings.NewReplacer(
	`\s`, `[`+Space+`]`,
	`\S`, `[^`+Space+`]`,
	`\w`, `[\p{L}\p{N}_]`,
	`\d`, `\p{Nd}`,
)

// Lazy is the pattern expr, compiled on its first match. Inside a bracket
// expression only \d may be used.
func Lazy(expr string) *Pattern {
	return &Pattern{compiled: sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(classes.Replace(expr))
	})}
}

// Pattern is a pattern of Lazy. Its methods are regexp.Regexp's.
type Pattern struct{ compiled func() *regexp.Regexp }

func (p *Pattern) FindStringSubmatch(s string) []string {
	return p.compiled().FindStringSubmatch(s)
}

func (p *Pattern) FindStringSubmatchIndex(s string) []int {
	return p.compiled().FindStringSubmatchIndex(s)
}

func (p *Pattern) FindAllStringSubmatch(s string, n int) [][]string {
	return p.compiled().FindAllStringSubmatch(s, n)
}

func (p *Pattern) ReplaceAllString(src, repl string) string {
	return p.compiled().ReplaceAllString(src, repl)
}

// IsSpace reports whether Python's str.isspace calls r whitespace.
func IsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// Strip is Python's str.strip() with no arguments.
func Strip(s string) string { return strings.TrimFunc(s, IsSpace) }
