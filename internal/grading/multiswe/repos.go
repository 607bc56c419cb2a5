package multiswe

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/minisandbox/msb/internal/grading"
)

// ParseFunc reads one run's test log. It fails only where the harness's
// parse_log raises (ErrNoSuite); a result that names a test twice is
// refused by Parse, not by the ParseFunc.
type ParseFunc func(log string) (Result, error)

// Framework names, one per parser.
const (
	FrameworkCargo           = "cargo"
	FrameworkGoTest          = "gotest"
	FrameworkSurefire        = "surefire"
	FrameworkSurefireRunning = "surefire_running"
	FrameworkGradle          = "gradle"
	FrameworkMocha           = "mocha"
	FrameworkJest            = "jest"
	FrameworkJestDarkreader  = "jest_darkreader"
	FrameworkCTestFmt        = "ctest_fmt"
	FrameworkCTestCatch2     = "ctest_catch2"
	FrameworkAutomake        = "automake"
)

var frameworks = map[string]ParseFunc{
	FrameworkCargo:           ParseCargo,
	FrameworkGoTest:          ParseGoTest,
	FrameworkSurefire:        ParseSurefire,
	FrameworkSurefireRunning: ParseSurefireRunning,
	FrameworkGradle:          ParseGradle,
	FrameworkMocha:           ParseMocha,
	FrameworkJest:            ParseJest,
	FrameworkJestDarkreader:  ParseJestDarkreader,
	FrameworkCTestFmt:        ParseCTestFmt,
	FrameworkCTestCatch2:     ParseCTestCatch2,
	FrameworkAutomake:        ParseAutomake,
}

// ParserPrefix starts the name under which each framework's parser is
// registered with grading (RegisterParser): a spec's log_parser
// "multiswe/cargo" names FrameworkCargo.
const ParserPrefix = "multiswe/"

// ParserName is the grading parser name of a framework.
func ParserName(framework string) string { return ParserPrefix + framework }

// registerParsers makes every framework a grading parser, so that a spec
// may name it; the grading.ParseFunc reads a log the harness refuses
// (Parse's errors) as naming no test.
func registerParsers() {
	for fw, p := range frameworks {
		grading.RegisterParser(ParserName(fw), func(log string) grading.StatusMap {
			r, err := Parse(p, log)
			if err != nil {
				return grading.StatusMap{}
			}
			return statusMap(r)
		})
	}
}

// Repos maps a repository ("org/name", as the rows spell it) to the
// framework whose parser the harness's default instance of that
// repository uses (multi-swe-bench 1.1.2, harness/repos/<lang>/<org>/).
// The harness's per-range instances (tokio_6229_to_4434 and the like) are
// chosen only by a row's number_interval, which the shared rows do not have.
var Repos = map[string]string{
	"tokio-rs/tokio":         FrameworkCargo,
	"tokio-rs/bytes":         FrameworkCargo,
	"BurntSushi/ripgrep":     FrameworkCargo,
	"rayon-rs/rayon":         FrameworkCargo,
	"zeromicro/go-zero":      FrameworkGoTest,
	"fasterxml/jackson-core": FrameworkSurefire,
	"google/gson":            FrameworkSurefireRunning,
	"mockito/mockito":        FrameworkGradle,
	"axios/axios":            FrameworkMocha,
	"iamkun/dayjs":           FrameworkJest,
	"darkreader/darkreader":  FrameworkJestDarkreader,
	"fmtlib/fmt":             FrameworkCTestFmt,
	"catchorg/Catch2":        FrameworkCTestCatch2,
	"jqlang/jq":              FrameworkAutomake,
}

// ErrUnknownRepo: no parser is known for the repository.
var ErrUnknownRepo = errors.New("no Multi-SWE-bench log parser for repository")

// ErrUnknownFramework: no parser has the name.
var ErrUnknownFramework = errors.New("unknown Multi-SWE-bench framework")

// ParserFor returns the parser of a repository.
func ParserFor(repo string) (ParseFunc, error) {
	fw, ok := Repos[repo]
	if !ok {
		known := make([]string, 0, len(Repos))
		for r := range Repos {
			known = append(known, r)
		}
		sort.Strings(known)
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownRepo, repo, strings.Join(known, ", "))
	}
	return Framework(fw)
}

// ErrNotFramework: a spec names a log parser that is not a framework of
// this package's.
var ErrNotFramework = errors.New("log parser is not a Multi-SWE-bench framework")

// parserOf returns the parser a row's grader reads logs with: the
// framework the spec names (log_parser "multiswe/<framework>"), else,
// when the spec names none, the repository's (Repos).
func parserOf(repo, parser string) (ParseFunc, error) {
	if parser == "" {
		return ParserFor(repo)
	}
	fw, ok := strings.CutPrefix(parser, ParserPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: %q (want %s<framework>, one of %s)", ErrNotFramework, parser, ParserPrefix, strings.Join(FrameworkNames(), ", "))
	}
	return Framework(fw)
}

// FrameworkNames lists the frameworks in sorted order.
func FrameworkNames() []string {
	names := make([]string, 0, len(frameworks))
	for n := range frameworks {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Framework returns the parser with the given name.
func Framework(name string) (ParseFunc, error) {
	p, ok := frameworks[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownFramework, name, strings.Join(FrameworkNames(), ", "))
	}
	return p, nil
}

// Parse reads a log with p and refuses a result the harness's TestResult
// would refuse (ErrConflict).
func Parse(p ParseFunc, log string) (Result, error) {
	r, err := p(log)
	if err != nil {
		return Result{}, err
	}
	if err := r.Check(); err != nil {
		return Result{}, err
	}
	return r, nil
}
