package grading

import (
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

// seedLogs adds the golden logs and a few awkward lines to a fuzz corpus.
func seedLogs(f *testing.F) {
	f.Helper()
	logs, _ := filepath.Glob(filepath.Join("testdata", "*", "*.log"))
	for _, p := range logs {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(string(b))
		}
	}
	for _, s := range []string{"", "PASSED", "FAILED - ", "FAILED  - x", "SKIPPED [1] a.py:2: r", "x PASSED", "\x1b[31mERROR\x1b[0m a",
		"FAIL:", "ERROR:", " ... ok", "ok", "__ a.py:b __", "test_ ok", "t (m.C) ...\nok", "\r\n\r", "[/a/b]", "x[]", "][",
		"t ... System check identified no issues (0 silenced)\nok"} {
		f.Add(s)
	}
}

// fuzzParser checks what holds for any input: no panic, and every recorded
// name is a non-empty substring-like token without a newline.
func fuzzParser(f *testing.F, parse ParseFunc) {
	seedLogs(f)
	f.Fuzz(func(t *testing.T, log string) {
		m := parse(log)
		for name := range m {
			if !utf8.ValidString(log) {
				continue
			}
			for _, r := range name {
				if r == '\n' {
					t.Fatalf("name %q spans lines", name)
				}
			}
		}
	})
}

func FuzzParsePytest(f *testing.F)        { fuzzParser(f, ParsePytest) }
func FuzzParsePytestOptions(f *testing.F) { fuzzParser(f, ParsePytestOptions) }
func FuzzParsePytestV2(f *testing.F)      { fuzzParser(f, ParsePytestV2) }
func FuzzParseSeaborn(f *testing.F)       { fuzzParser(f, ParseSeaborn) }
func FuzzParseMatplotlib(f *testing.F)    { fuzzParser(f, ParseMatplotlib) }
func FuzzParseDjango(f *testing.F)        { fuzzParser(f, ParseDjango) }
func FuzzParseSympy(f *testing.F)         { fuzzParser(f, ParseSympy) }
func FuzzParseUnittest(f *testing.F)      { fuzzParser(f, ParseUnittest) }

func FuzzParseEvalLog(f *testing.F) {
	seedLogs(f)
	f.Add(goodLog)
	f.Fuzz(func(t *testing.T, log string) {
		m, problem := ParseEvalLog(ParsePytest, log)
		if problem != LogOK && len(m) != 0 {
			t.Fatalf("statuses %v despite problem %q", m, problem)
		}
	})
}
