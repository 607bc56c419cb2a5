package multiswe

import (
	"errors"
	"fmt"
	"sort"
	"strings"
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

// Framework returns the parser with the given name.
func Framework(name string) (ParseFunc, error) {
	p, ok := frameworks[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownFramework, name)
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
