package spec

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/minisandbox/msb/internal/dataset"
)

// The SWE-bench Multilingual table: the repositories of SWE-bench
// Multilingual (C/C++, Go, Java, JavaScript/TypeScript, PHP, Ruby, Rust;
// one version per task, the pull request's number), with the facts of the
// swebench package (4.1.0, harness/constants/<lang>.py and the parsers of
// harness/log_parsers/<lang>.py) in multilingual.json, which
// testdata/multilingual/dump.py writes from the package and
// TestMultilingualTableMatchesHarness compares with it. A version's spec
// is made from those facts by the same rule for every repository:
//
//   - PreInstall: the harness's pre_install; Install: its install, then
//     its build, as the harness's repository script runs them (C's build
//     only in the evaluation: mlNoBuildAtInstall);
//   - TestCmd: its build, then its test commands, one a line, as its eval
//     script runs them after the test patch (msb has no step between the
//     test patch and the tests, so the build is part of the test command,
//     and of the graded output: see mlEvalBuildSuffix);
//   - LogParser: the parser the harness's MAP_REPO_TO_PARSER uses for the
//     instance (for jekyll and immutable-js, the one their dispatcher
//     chooses for the version), ported in package grading;
//   - the language's toolchains from the host, Directives none.
//
// Where msb runs something else than the harness's image,
// mlInstallRewrites, mlEvalRewrites and mlBlocked say what, and docs/languages.md ("SWE-bench Multilingual")
// says why.

//go:embed multilingual.json
var multilingualJSON []byte

// mlFacts is multilingual.json: dump.py's output.
type mlFacts struct {
	Swebench string                `json:"swebench"`
	Repos    map[string]mlRepoFact `json:"repos"`
}

// mlRepoFact is one repository of the harness's table.
type mlRepoFact struct {
	Module   string                   `json:"module"` // constants/<module>.py
	Ext      string                   `json:"ext"`
	Versions map[string]mlVersionFact `json:"versions"`
}

// mlVersionFact is one version's spec in the harness's table.
type mlVersionFact struct {
	PreInstall  []string       `json:"pre_install,omitempty"`
	Install     []string       `json:"install,omitempty"`
	Build       []string       `json:"build,omitempty"`
	TestCmd     []string       `json:"test_cmd"`
	AptPkgs     []string       `json:"apt_pkgs,omitempty"`
	DockerSpecs map[string]any `json:"docker_specs"`
	Parser      string         `json:"parser"`
}

// ErrToolchainUnavailable is returned for a row whose repository needs a
// toolchain msb cannot provide here (PHP, Ruby, Ant, a browser, ...).
var ErrToolchainUnavailable = errors.New("toolchain not available")

// mlLang is what msb runs a harness module's repositories with.
type mlLang struct {
	language   string
	toolchains []string
	system     []string // Debian packages of the harness's base image that msb's base lacks
}

// mlLangs: per constants module, the language, toolchains and packages.
// The C image's packages (autotools, tcl for redis's and valkey's test
// runner, bison and flex for jq) are the harness's base Dockerfile's.
var mlLangs = map[string]mlLang{
	"c":          {language: LangC, toolchains: []string{"gcc", "make", "cmake"}, system: []string{"autoconf", "automake", "bison", "flex", "libtool", "tcl"}},
	"go":         {language: LangGo, toolchains: []string{"go"}},
	"rust":       {language: LangRust, toolchains: []string{"rust"}},
	"java":       {language: LangJava, toolchains: []string{"java", "maven"}},
	"javascript": {language: LangJavaScript, toolchains: []string{"node"}, system: []string{"jq"}}, // jq: immutable-js 2005 pipes Jest's JSON through it
}

// mlCPP are the C++ repositories of the harness's C module.
var mlCPP = map[string]bool{"fmtlib/fmt": true, "nlohmann/json": true}

// mlBlocked are the repositories msb has no toolchain for here, and why.
// Their rows get ErrToolchainUnavailable, not a spec that cannot work.
var mlBlocked = map[string]string{
	"phpoffice/phpspreadsheet":  "PHP and Composer are not among msb's toolchains",
	"laravel/framework":         "PHP and Composer are not among msb's toolchains",
	"php-cs-fixer/php-cs-fixer": "PHP and Composer are not among msb's toolchains",
	"briannesbitt/carbon":       "PHP and Composer are not among msb's toolchains",
	"jekyll/jekyll":             "Ruby and Bundler are not among msb's toolchains",
	"fluent/fluentd":            "Ruby and Bundler are not among msb's toolchains",
	"fastlane/fastlane":         "Ruby and Bundler are not among msb's toolchains",
	"jordansissel/fpm":          "Ruby and Bundler are not among msb's toolchains",
	"faker-ruby/faker":          "Ruby and Bundler are not among msb's toolchains",
	"rubocop/rubocop":           "Ruby and Bundler are not among msb's toolchains",
	"projectlombok/lombok":      "Apache Ant is not among msb's toolchains",
	"apache/lucene":             "it needs JDK 21 and its Gradle wrapper's download; the host has JDK 17",
	"reactivex/rxjava":          "its Gradle wrapper downloads Gradle, which offline builds cannot",
	"preactjs/preact":           "its Karma tests need Google Chrome, which msb does not provide",
	"babel/babel":               "it needs Yarn, which is not on the host (corepack would download it)",
	"facebook/docusaurus":       "it needs Yarn, which is not on the host (corepack would download it)",
	"vuejs/core":                "it needs pnpm, which is not on the host (corepack would download it)",
}

// mlInstallRewrites and mlEvalRewrites are msb's changes to the
// harness's commands, by constants module, in the install step and in the
// evaluation's build and test commands: Maven runs as the host's mvn (the
// harness's image has the Maven daemon, mvnd; javaparser's wrapper,
// ./mvnw, would download another Maven), in the evaluation offline from
// the local repository the install filled and without colours.
var (
	mlInstallRewrites = map[string]*strings.Replacer{
		"java": strings.NewReplacer("mvnd ", "mvn ", "./mvnw ", "mvn "),
		"go":   strings.NewReplacer("go test -c ", "go test -c -o "+goTestBinaries+" "),
	}
	mlEvalRewrites = map[string]*strings.Replacer{
		"java": strings.NewReplacer("mvnd ", mvnOfflineNoColour+" ", "./mvnw ", mvnOfflineNoColour+" ", "mvn ", mvnOfflineNoColour+" "),
	}
)

// goTestBinaries is where the install step's `go test -c` (run to fill
// the module and build caches) writes its test binaries: the harness's
// lands in the repository, where a task's diff, which takes untracked
// files, would carry a binary of megabytes in every agent's patch.
const goTestBinaries = "/tmp/msb-go-test-binaries/"

// mlNoBuildAtInstall are the constants modules whose build step the
// install step leaves out: a C build writes objects, configure's output
// and CMake build trees into the repository, untracked, which every
// agent's patch would then carry; the evaluation builds anyway. (Maven's
// and Node's outputs are ignored by the repositories' .gitignore, and
// javaparser's build is its only online Maven run.)
var mlNoBuildAtInstall = map[string]bool{"c": true}

// mvnOfflineNoColour is Maven as a Multilingual evaluation runs it.
const mvnOfflineNoColour = "mvn -o -Dstyle.color=never"

// mlEvalBuildSuffix follows each build command of an evaluation, by
// constants module. The harness builds before its test output starts, so
// its parser never reads the build's output; msb's build is part of the
// test command. For Maven this matters: the maven parser pairs a BUILD
// SUCCESS that no -Dtest= command precedes with a test whose own run
// printed none, so the build's line is renamed (pipefail keeps Maven's
// status).
var mlEvalBuildSuffix = map[string]string{
	"java": ` | sed 's/BUILD \(SUCCESS\|FAILURE\)$/& (msb: the build step)/'`,
}

// multilingualTable is multilingual.json, read on first use (not at
// start-up: most runs never need it).
var multilingualTable = sync.OnceValue(func() mlFacts {
	var f mlFacts
	if err := json.Unmarshal(multilingualJSON, &f); err != nil {
		panic(fmt.Sprintf("spec: multilingual.json: %v", err))
	}
	return f
})

// MultilingualBuiltin returns the built-in spec of a SWE-bench
// Multilingual row: the entry of its repository and version. ok is false
// when the table has neither; the error wraps ErrToolchainUnavailable
// for a repository msb cannot run here.
func MultilingualBuiltin(in dataset.Instance) (s Spec, ok bool, err error) {
	repo, found := multilingualTable().Repos[in.Repo]
	if !found {
		return Spec{}, false, nil
	}
	v, found := repo.Versions[in.Version]
	if !found {
		return Spec{}, false, nil
	}
	if why, blocked := mlBlocked[in.Repo]; blocked {
		return Spec{}, false, fmt.Errorf("%w for %s (%s): %s (docs/languages.md, SWE-bench Multilingual)",
			ErrToolchainUnavailable, in.InstanceID, in.Repo, why)
	}
	lang, found := mlLangs[repo.Module]
	if !found {
		return Spec{}, false, fmt.Errorf("%w for %s (%s): no %s toolchain", ErrToolchainUnavailable, in.InstanceID, in.Repo, repo.Module)
	}
	return mlSpec(in.Repo, in.Version, repo.Module, lang, v), true, nil
}

// mlSpec makes a version's spec from the harness's facts.
func mlSpec(repo, version, module string, lang mlLang, v mlVersionFact) Spec {
	install := slices.Clone(v.Install)
	if !mlNoBuildAtInstall[module] {
		install = append(install, v.Build...)
	}
	var eval []string
	for _, c := range v.Build {
		eval = append(eval, c+mlEvalBuildSuffix[module])
	}
	eval = append(eval, v.TestCmd...)
	s := Spec{
		Repo: repo, Version: version,
		Language:       lang.language,
		Toolchains:     mlToolchains(module, lang.toolchains, v.DockerSpecs),
		SystemPackages: mlSystemPackages(lang.system, v.AptPkgs),
		PreInstall:     slices.Clone(v.PreInstall),
		Install:        mlJoin(install, mlInstallRewrites[module]),
		TestCmd:        mlJoin(eval, mlEvalRewrites[module]),
		Directives:     DirectivesNone,
		LogParser:      v.Parser,
		Env:            map[string]string{"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"},
		Source:         []string{"builtin"},
	}
	if mlCPP[repo] {
		s.Language = LangCPP
	}
	return s
}

// mlPins: per constants module, the toolchain whose version the
// harness's docker_specs pin per version, and the key that says it. msb
// fetches those it can (spec.ToolchainVersioned); Rust's and Java's pins
// are not followed (no fetch of Rust; a JDK 11 runtime needs Surefire's
// jvm in each Maven command).
var mlPins = map[string][2]string{"go": {"go", "go_version"}, "javascript": {"node", "node_version"}}

// mlToolchains are the language's toolchains, the pinned one as
// name@version (Go 1.18.10 to 1.23.8, Node 16 to 20 in 4.1.0).
func mlToolchains(module string, tcs []string, docker map[string]any) []string {
	out := slices.Clone(tcs)
	pin, ok := mlPins[module]
	v, _ := docker[pin[1]].(string)
	if !ok || v == "" {
		return out
	}
	for i, tc := range out {
		if tc == pin[0] {
			out[i] = tc + "@" + v
		}
	}
	return out
}

// mlJoin is cmds one a line, each rewritten by r (nil: as they are).
func mlJoin(cmds []string, r *strings.Replacer) string {
	out := slices.Clone(cmds)
	if r != nil {
		for i, c := range out {
			out[i] = r.Replace(c)
		}
	}
	return strings.Join(out, "\n")
}

// mlSystemPackages is the language's packages and the version's apt-pkgs,
// sorted, without repeats; nil for none.
func mlSystemPackages(lang, apt []string) []string {
	pkgs := append(slices.Clone(lang), apt...)
	if len(pkgs) == 0 {
		return nil
	}
	slices.Sort(pkgs)
	return slices.Compact(pkgs)
}
