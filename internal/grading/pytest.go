package grading

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// pytest prints one result per line in two shapes:
//
//	PASSED tests/test_a.py::test_x          (-rA short summary; FAILED/ERROR add " - reason")
//	tests/test_a.py::test_x PASSED [ 10%]   (-v; with -o console_output_style=classic, no percentage)
//
// The harness's pytest and pytest_options parsers read the first shape only;
// pytest_v2 reads both (the second only where the line ends with the
// status). They are reproduced here to the letter (TestParsersMatchHarness
// compares them with swebench 4.1.0's on thousands of logs): a line that
// starts with a status word, even one glued to more letters ("PASSEDX a"),
// records its second word as the test's name and its first word, whole, as
// the status (which grading then counts only if it is one); a FAILED
// line loses its " - " separators first; names are cut at the first
// whitespace, so "test_p[a b]" is recorded as "test_p[a", as in the
// datasets' lists; and "SKIPPED [2] file.py:12: reason" records "[2]".
// ParsePytestVerbose is SWE-smith's, for repositories without a harness
// spec, whose default test command prints the second shape.

// ParsePytest is the harness's parse_log_pytest.
func ParsePytest(log string) StatusMap {
	m := StatusMap{}
	for _, line := range pyLines(log) {
		if name, st, ok := statusFirst(line); ok {
			m[name] = st
		}
	}
	return m
}

// ParsePytestOptions is the harness's parse_log_pytest_options: like
// ParsePytest, but a parameter that is an absolute path is shortened to its
// last element ("test_x[/tmp/a/b.txt]" becomes "test_x[/b.txt]"), because
// those paths differ between machines.
func ParsePytestOptions(log string) StatusMap {
	m := StatusMap{}
	for _, line := range pyLines(log) {
		if name, st, ok := statusFirst(line); ok {
			m[normalizePytestOption(name)] = st
		}
	}
	return m
}

// ParsePytestV2 is the harness's parse_log_pytest_v2 (astropy, scikit-learn,
// sphinx): colour codes ("[31m") and control characters are removed first,
// so that coloured output (tox, --color=yes) parses. A line that starts
// with a status word is read as by ParsePytest; otherwise a line that ends
// with one records its second word as the status of its first.
func ParsePytestV2(log string) StatusMap {
	m := StatusMap{}
	for _, line := range pyLines(log) {
		line = stripColor(line)
		if hasStatusPrefix(line) {
			if name, st, ok := statusFirst(line); ok {
				m[name] = st
			}
			continue
		}
		if hasStatusSuffix(line) {
			if f := pyFields(line); len(f) >= 2 {
				m[f[0]] = Status(f[1])
			}
		}
	}
	return m
}

// ParsePytestVerbose is SWE-smith's parser for Python repositories
// (PythonProfile.log_parser, swesmith 0.0.9; TestParsersMatchHarness
// compares them), the default for a repository without a harness spec,
// whose test command (spec.Default, SWE-smith's) prints the second shape: a
// line whose first word is followed by whitespace and a status word records
// that status for the word, whatever follows the status ("t PASSEDX" is
// PASSED). Lines that start with a status word are not read.
func ParsePytestVerbose(log string) StatusMap {
	m := StatusMap{}
	for _, line := range pyLines(log) {
		name, rest := firstWord(line)
		if name == "" || len(name) == len(line) {
			continue
		}
		for _, st := range statuses {
			if strings.HasPrefix(rest, string(st)) {
				m[name] = st
			}
		}
	}
	return m
}

// statusFirst is the harness's reading of a line that starts with a status
// word: the line's first word is the status, its second the name.
func statusFirst(line string) (name string, st Status, ok bool) {
	if !hasStatusPrefix(line) {
		return "", "", false
	}
	if strings.HasPrefix(line, string(Failed)) {
		line = strings.ReplaceAll(line, " - ", " ")
	}
	f := pyFields(line)
	if len(f) < 2 {
		return "", "", false
	}
	return f[1], Status(f[0]), true
}

// hasStatusPrefix is the harness's any(line.startswith(status)).
func hasStatusPrefix(line string) bool {
	for _, st := range statuses {
		if strings.HasPrefix(line, string(st)) {
			return true
		}
	}
	return false
}

// hasStatusSuffix is the harness's any(line.endswith(status)).
func hasStatusSuffix(line string) bool {
	for _, st := range statuses {
		if strings.HasSuffix(line, string(st)) {
			return true
		}
	}
	return false
}

// firstWord returns the leading run of non-space runes of s (s must not start
// with whitespace for the word to be found) and the rest after the whitespace
// that follows it.
func firstWord(s string) (word, rest string) {
	i := strings.IndexFunc(s, isPySpace)
	if i < 0 {
		return s, ""
	}
	word = s[:i]
	return word, strings.TrimLeftFunc(s[i:], isPySpace)
}

// normalizePytestOption shortens an absolute-path parameter to its last
// element. Like the harness it keeps the text up to the first "[" and from
// there to the last "]", dropping anything after the last "]".
func normalizePytestOption(name string) string {
	open := strings.IndexByte(name, '[')
	if open < 0 {
		return name
	}
	end := strings.LastIndexByte(name, ']')
	if end <= open {
		return name
	}
	main, option := name[:open], name[open+1:end]
	if strings.HasPrefix(option, "/") && !strings.HasPrefix(option, "//") && !strings.Contains(option, "*") {
		option = "/" + option[strings.LastIndexByte(option, '/')+1:]
	}
	return main + "[" + option + "]"
}

// stripColor removes "[<digits>m" sequences and the control characters
// U+0001 to U+001F, as the harness's pytest_v2 parser does.
func stripColor(line string) string {
	var b strings.Builder
	b.Grow(len(line))
	for i := 0; i < len(line); {
		if line[i] == '[' {
			j := i + 1
			for j < len(line) {
				r, size := utf8.DecodeRuneInString(line[j:])
				if !unicode.IsDigit(r) {
					break
				}
				j += size
			}
			if j > i+1 && j < len(line) && line[j] == 'm' {
				i = j + 1
				continue
			}
		}
		r, size := utf8.DecodeRuneInString(line[i:])
		if r >= 1 && r < 32 {
			i += size
			continue
		}
		b.WriteString(line[i : i+size])
		i += size
	}
	return b.String()
}
