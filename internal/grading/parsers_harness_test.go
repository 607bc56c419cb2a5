package grading

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// harnessLog is one question to the harness's parsers (harness.py parse).
type harnessLog struct {
	Parser string `json:"parser"`
	Log    string `json:"log"`
}

// harnessMap is the harness's answer: the status map, or the exception its
// parser raised.
type harnessMap struct {
	Map   map[string]string `json:"map"`
	Error string            `json:"error"`
}

// harnessParse parses logs with the harness's own parsers: those of the
// swebench package that MSB_TEST_PYTHON imports (4.1.0, the test venv's:
// the parsers of the harness that made the datasets' lists, which cut a
// name at its first space), and for pytest_verbose SWE-smith's (swesmith
// 0.0.9, the test venv's).
func harnessParse(t *testing.T, logs []harnessLog) []harnessMap {
	t.Helper()
	var maps []harnessMap
	runHarness(t, logs, &maps, "-", "parse")
	if len(maps) != len(logs) {
		t.Fatalf("harness.py answered %d maps for %d logs", len(maps), len(logs))
	}
	return maps
}

// harnessParsers are msb's parsers that have a counterpart: the harness's
// parse_log_<name>, or SWE-smith's for ParserPytestVerbose. ParserUnittest
// has none.
var harnessParsers = []string{ParserPytest, ParserPytestOptions, ParserPytestV2, ParserSeaborn,
	ParserMatplotlib, ParserDjango, ParserSympy, ParserPytestVerbose}

// Fragments of the lines randomLog makes: what the frameworks print, what
// the parsers look for, and what trips them (space-like runes, colour
// codes, stray brackets, statuses glued to words).
var (
	logWords = []string{"PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", "XPASS", "PASSEDX", "ERRORS", "ok", "OK",
		"FAIL", "E", "F", "s", "FAIL:", "ERROR:", "skipped", "'reason'", "expected failure", "unexpected success",
		"tests/test_a.py::test_x", "tests/test_a.py::T::test_y", "test_p[a b]", "test_q[/tmp/a/b.txt]", "test_r[//x/y]",
		"test_s[/a*b]", "t[a][b]x", "t[", "]", "[1]", "[100%]", "[ 50%]", "a.py:12:", "test_foo (m.T)",
		"test_bar (m.T.test_bar)", "Docstring line.", "sympy/core/tests/test_a.py:test_b", "test_c", "test_",
		"x[MouseButton.LEFT]", "MouseButton.RIGHT", "--version is equivalent to version", "Applying sites.0002_alter_domain_unique...test_no_migrations",
		"System check identified no issues (0 silenced)", "Internal Server Error: /a/", "silenced).", "Testing against Django installed in '/x'",
		"__", "____", "-", "...", "é", "[31m"}
	logSeps = []string{" ", " ", " ", "  ", "\t", " - ", " ... ", " ...  ", "...", "\x1b[31m", "[0m", "\x1b[1m",
		"\x1c", "\u00a0", "\u2003", "\u0085", "", "_____", " _____ ", "\n", "\r", "\r\n", "\f"}
	logEnds = []string{"\n", "\n", "\n", "\r\n", "\r", " \n", "\nok\n"}
)

// randomLog makes a log of one to six lines of fragments.
func randomLog(r *rand.Rand) string {
	var b strings.Builder
	for range 1 + r.IntN(6) {
		switch r.IntN(4) {
		case 0:
			b.WriteString(logSeps[r.IntN(len(logSeps))])
		case 1:
			b.WriteString(" ")
		}
		for i := range 1 + r.IntN(5) {
			if i > 0 {
				b.WriteString(logSeps[r.IntN(len(logSeps))])
			}
			b.WriteString(logWords[r.IntN(len(logWords))])
		}
		b.WriteString(logEnds[r.IntN(len(logEnds))])
	}
	return b.String()
}

// TestParsersMatchHarness gives the same logs to each of msb's parsers and
// to the harness's parser of the same name (swebench 4.1.0; SWE-smith's for
// pytest_verbose): every golden
// log, every real evaluation log of testdata/harness/logs and 3000 random
// logs, each to every parser. The status maps must be equal, key for key
// and status for status. A log on which the harness's parser raises (its
// evaluation would stop there) is not compared.
func TestParsersMatchHarness(t *testing.T) {
	var texts []string
	for _, pattern := range []string{"testdata/*/*.log", "testdata/harness/logs/*/*/test_output.txt"} {
		paths, err := filepath.Glob(pattern)
		if err != nil || len(paths) == 0 {
			t.Fatalf("no logs match %s: %v", pattern, err)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			texts = append(texts, string(b))
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		texts = append(texts, randomLog(r))
	}
	var logs []harnessLog
	for _, text := range texts {
		for _, p := range harnessParsers {
			logs = append(logs, harnessLog{Parser: p, Log: text})
		}
	}
	want := harnessParse(t, logs)
	raised, differ, nonEmpty := 0, 0, 0
	for i, l := range logs {
		if want[i].Error != "" {
			raised++
			continue
		}
		parse, err := Lookup(l.Parser)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for name, st := range parse(l.Log) {
			got[name] = string(st)
		}
		if want[i].Map == nil {
			want[i].Map = map[string]string{}
		}
		if len(want[i].Map) > 0 {
			nonEmpty++
		}
		if !reflect.DeepEqual(got, want[i].Map) {
			if differ++; differ <= 20 {
				t.Errorf("%s parser on %q:\n%s", l.Parser, clip(l.Log), mapDiff(got, want[i].Map))
			}
		}
	}
	t.Logf("%d logs compared (%d with a status), %d differ; the harness's parser raised on %d", len(logs)-raised, nonEmpty, differ, raised)
}

// mapDiff lists the names whose status differs, msb's first.
func mapDiff(msb, harness map[string]string) string {
	var b strings.Builder
	for name, st := range msb {
		if hs, ok := harness[name]; !ok || hs != st {
			fmt.Fprintf(&b, "  %q: msb %q, harness %q\n", name, st, hs)
		}
	}
	for name, hs := range harness {
		if _, ok := msb[name]; !ok {
			fmt.Fprintf(&b, "  %q: msb none, harness %q\n", name, hs)
		}
	}
	return b.String()
}

// clip shortens a log for a failure message.
func clip(s string) string {
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}
