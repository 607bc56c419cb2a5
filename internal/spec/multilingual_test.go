package spec

import (
	"encoding/json"
	"errors"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/privtest"
)

// mlDump is the script that writes multilingual.json from the package.
const mlDump = "testdata/multilingual/dump.py"

// mlRow is a SWE-bench Multilingual row of repo at version, as the
// benchmark names its instances.
func mlRow(repo, version string) dataset.Instance {
	return dataset.Instance{Source: dataset.SWEBench, Repo: repo, Version: version,
		InstanceID: strings.ReplaceAll(repo, "/", "__") + "-" + version, BaseCommit: "0123456789abcdef0123456789abcdef01234567"}
}

// TestMultilingualTableMatchesHarness compares the built-in SWE-bench
// Multilingual table with the swebench package of the test venv (4.1.0,
// the one TestTableMatchesHarness follows): multilingual.json must be what
// dump.py prints now (the same repositories, versions, commands, install
// steps and parsers; regenerate it with `dump.py > multilingual.json`),
// and every version's spec must be the harness's facts with msb's stated
// changes only (Maven's, mlBlocked, the toolchains).
func TestMultilingualTableMatchesHarness(t *testing.T) {
	py := privtest.Python(t, "SWE-bench Multilingual's spec table (swebench of the test venv)")
	out, err := exec.Command(py, mlDump).Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg += ": " + string(ee.Stderr)
		}
		t.Fatalf("%s: %s", mlDump, msg)
	}
	var live mlFacts
	if err := json.Unmarshal(out, &live); err != nil {
		t.Fatalf("%s printed: %v", mlDump, err)
	}
	if live.Swebench != harnessVersion {
		t.Fatalf("the test venv has swebench %s; the table follows %s", live.Swebench, harnessVersion)
	}
	if !reflect.DeepEqual(live, multilingualTable()) {
		for repo, want := range live.Repos {
			if got, ok := multilingualTable().Repos[repo]; !ok || !reflect.DeepEqual(got, want) {
				t.Errorf("%s: multilingual.json differs from the harness's table", repo)
			}
		}
		t.Fatalf("multilingual.json is not the package's table: regenerate it with %s", mlDump)
	}
	versions := 0
	for repo, facts := range live.Repos {
		for version, v := range facts.Versions {
			versions++
			checkMultilingualSpec(t, repo, version, facts.Module, v)
		}
	}
	if len(live.Repos) < 40 || versions < 300 {
		t.Errorf("the harness's table has %d repositories, %d versions: dump.py reads too little", len(live.Repos), versions)
	}
	for repo := range mlBlocked {
		if _, ok := live.Repos[repo]; !ok {
			t.Errorf("mlBlocked names %s, which the harness's table has not", repo)
		}
	}
}

// checkMultilingualSpec checks the spec of one version against the
// harness's facts v.
func checkMultilingualSpec(t *testing.T, repo, version, module string, v mlVersionFact) {
	t.Helper()
	in := mlRow(repo, version)
	s, ok, err := MultilingualBuiltin(in)
	if why, blocked := mlBlocked[repo]; blocked {
		if !errors.Is(err, ErrToolchainUnavailable) || ok || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: blocked (%s), but MultilingualBuiltin = %v, %v", in.InstanceID, why, ok, err)
		}
		return
	}
	if err != nil || !ok {
		t.Errorf("%s: MultilingualBuiltin = %v, %v", in.InstanceID, ok, err)
		return
	}
	// msb's stated changes (docs/languages.md): Maven as the host's mvn,
	// offline and without colours in the evaluation; go test -c's
	// binaries out of the repository; no C build at install
	installRW, evalRW, buildSuffix := strings.NewReplacer(), strings.NewReplacer(), ""
	if module == "java" {
		buildSuffix = ` | sed 's/BUILD \(SUCCESS\|FAILURE\)$/& (msb: the build step)/'`
		installRW = strings.NewReplacer("mvnd ", "mvn ", "./mvnw ", "mvn ")
		evalRW = strings.NewReplacer("mvnd ", "mvn -o -Dstyle.color=never ", "./mvnw ", "mvn -o -Dstyle.color=never ",
			"mvn ", "mvn -o -Dstyle.color=never ")
	}
	if module == "go" {
		installRW = strings.NewReplacer("go test -c ", "go test -c -o /tmp/msb-go-test-binaries/ ")
	}
	installBuild := v.Build
	if module == "c" {
		installBuild = nil // C's build writes untracked files into the repository
	}
	join := func(r *strings.Replacer, parts ...[]string) string {
		var lines []string
		for _, p := range parts {
			for _, c := range p {
				lines = append(lines, r.Replace(c))
			}
		}
		return strings.Join(lines, "\n")
	}
	var build []string
	for _, c := range v.Build {
		build = append(build, c+buildSuffix)
	}
	wantTest := join(evalRW, build, v.TestCmd)
	wantInstall := join(installRW, v.Install, installBuild)
	switch {
	case s.TestCmd != wantTest:
		t.Errorf("%s: test_cmd %q, harness (build, tests) %q", in.InstanceID, s.TestCmd, wantTest)
	case s.Install != wantInstall:
		t.Errorf("%s: install %q, harness (install, build) %q", in.InstanceID, s.Install, wantInstall)
	case !slices.Equal(s.PreInstall, v.PreInstall):
		t.Errorf("%s: pre_install %q, harness %q", in.InstanceID, s.PreInstall, v.PreInstall)
	case s.LogParser != v.Parser:
		t.Errorf("%s: log_parser %q, harness %q", in.InstanceID, s.LogParser, v.Parser)
	case s.Directives != DirectivesNone:
		t.Errorf("%s: directives %q: the harness's eval script runs test_cmd as it is", in.InstanceID, s.Directives)
	}
	for _, p := range v.AptPkgs {
		if !slices.Contains(s.SystemPackages, p) {
			t.Errorf("%s: apt-pkgs %q missing from system_packages %q", in.InstanceID, p, s.SystemPackages)
		}
	}
	if err := s.Validate(); err != nil {
		t.Errorf("%s: %v", in.InstanceID, err)
	}
	if _, err := grading.Lookup(s.LogParser); err != nil {
		t.Errorf("%s: %v", in.InstanceID, err)
	}
}

// TestResolveMultilingual: spec.Resolve finds the table's entry for a
// SWE-bench row of a Multilingual repository, refuses one msb has no
// toolchain for with ErrToolchainUnavailable, and leaves Multi-SWE-bench
// rows of the repositories both benchmarks have (tokio, jq, fmt) to the
// Multi-SWE-bench table.
func TestResolveMultilingual(t *testing.T) {
	s, err := Resolve(mlRow("gin-gonic/gin", "1805"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Language != LangGo || s.LogParser != "gotest" || !strings.Contains(s.TestCmd, "go test -v") || s.Source[0] != "builtin" {
		t.Errorf("gin 1805: language %q, parser %q, test_cmd %q, source %q", s.Language, s.LogParser, s.TestCmd, s.Source)
	}
	// the harness's pinned Go and Node (docker_specs), fetched when the host's differ
	for repo, want := range map[[2]string][]string{{"gin-gonic/gin", "1805"}: {"go@1.23.8"}, {"caddyserver/caddy", "4774"}: {"go@1.18.10"}, {"axios/axios", "5316"}: {"node@20"}} {
		if p, err := Resolve(mlRow(repo[0], repo[1]), nil); err != nil || !slices.Equal(p.Toolchains, want) {
			t.Errorf("%s %s: toolchains %q, %v; want %q", repo[0], repo[1], p.Toolchains, err, want)
		}
	}
	s, err = Resolve(mlRow("immutable-js/immutable-js", "2005"), nil)
	if err != nil || s.LogParser != "jest_json" {
		t.Errorf("immutable-js 2005: parser %q, %v (the dispatcher's choice is jest_json)", s.LogParser, err)
	}
	s, err = Resolve(mlRow("fmtlib/fmt", "3863"), nil)
	if err != nil || s.Language != LangCPP || s.LogParser != "googletest" {
		t.Errorf("fmt 3863: language %q, parser %q, %v", s.Language, s.LogParser, err)
	}
	if _, err := Resolve(mlRow("laravel/framework", "46234"), nil); !errors.Is(err, ErrToolchainUnavailable) {
		t.Errorf("laravel: %v, want ErrToolchainUnavailable", err)
	}
	if _, err := Resolve(mlRow("gin-gonic/gin", "1"), nil); !errors.Is(err, ErrNoSpec) {
		t.Errorf("gin at a version the table has not: %v, want ErrNoSpec", err)
	}
	multi := mlRow("tokio-rs/tokio", "6724")
	multi.Source = dataset.MultiSWEBench
	if r, err := Resolve(multi, nil); err == nil && r.LogParser == "cargo" {
		t.Errorf("a Multi-SWE-bench tokio row got the Multilingual spec")
	}
}
