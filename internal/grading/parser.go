package grading

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/minisandbox/msb/internal/grading/pyre"
)

// ParseFunc reads a test log and returns the status of each test it names.
// A ParseFunc never fails: text it does not understand is skipped.
type ParseFunc func(log string) StatusMap

// Parser names, as used in specs (spec.Spec.LogParser).
const (
	ParserPytest        = "pytest"         // harness parse_log_pytest: flask, pytest, xarray, astroid, ...
	ParserPytestOptions = "pytest_options" // harness parse_log_pytest_options: requests, pylint, pydicom
	ParserPytestV2      = "pytest_v2"      // harness parse_log_pytest_v2: astropy, scikit-learn, sphinx
	ParserSeaborn       = "seaborn"        // harness parse_log_seaborn
	ParserMatplotlib    = "matplotlib"     // harness parse_log_matplotlib
	ParserDjango        = "django"         // harness parse_log_django
	ParserSympy         = "sympy"          // harness parse_log_sympy
	ParserPytestVerbose = "pytest_verbose" // SWE-smith's, for pytest --verbose: spec.Default
	ParserUnittest      = "unittest"       // python -m unittest -v (not a harness parser)
)

var (
	parsersMu sync.RWMutex // guards parsers
	parsers   = map[string]ParseFunc{
		ParserPytest:        ParsePytest,
		ParserPytestOptions: ParsePytestOptions,
		ParserPytestV2:      ParsePytestV2,
		ParserSeaborn:       ParseSeaborn,
		ParserMatplotlib:    ParseMatplotlib,
		ParserDjango:        ParseDjango,
		ParserSympy:         ParseSympy,
		ParserPytestVerbose: ParsePytestVerbose,
		ParserUnittest:      ParseUnittest,
	}
)

// ErrUnknownParser is returned by Lookup for a name no parser has.
var ErrUnknownParser = errors.New("unknown log parser")

// RegisterParser adds a parser under a name another harness's package
// owns, "<harness>/<framework>" (package multiswe registers
// "multiswe/cargo" and the like when imported), so that a spec may name it.
func RegisterParser(name string, p ParseFunc) {
	parsersMu.Lock()
	defer parsersMu.Unlock()
	if _, dup := parsers[name]; dup {
		panic(fmt.Sprintf("grading: a parser is already registered as %q", name))
	}
	parsers[name] = p
}

// Lookup returns the parser with the given name.
func Lookup(name string) (ParseFunc, error) {
	parsersMu.RLock()
	p, ok := parsers[name]
	parsersMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownParser, name, strings.Join(ParserNames(), ", "))
	}
	return p, nil
}

// ParserNames lists the parser names in sorted order.
func ParserNames() []string {
	parsersMu.RLock()
	defer parsersMu.RUnlock()
	names := make([]string, 0, len(parsers))
	for n := range parsers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// The harness's parsers are Python; these helpers give Go the same notion of
// whitespace (str.isspace, str.split(), str.strip()) so that test names are
// cut where the harness cuts them.

// isPySpace reports whether Python's str.isspace would call r whitespace.
var isPySpace = pyre.IsSpace

// pyFields is Python's str.split() with no arguments.
func pyFields(s string) []string { return strings.FieldsFunc(s, isPySpace) }

// pyStrip is Python's str.strip() with no arguments.
var pyStrip = pyre.Strip

// pyLines splits a log into lines as the harness sees them: it reads the log
// file in Python's text mode, which turns "\r\n" and a lone "\r" into "\n",
// and then splits on "\n". (A progress line rewritten with "\r" thus yields
// one line per rewrite.)
func pyLines(s string) []string { return strings.Split(universalNewlines(s), "\n") }

// universalNewlines is what Python's text-mode read does to line endings.
func universalNewlines(s string) string {
	if !strings.Contains(s, "\r") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
}
