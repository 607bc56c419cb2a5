package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/grading/multiswe"
	"github.com/minisandbox/msb/internal/privtest"
)

// multiSWERowsDir holds the shared Multi-SWE-bench rows.
const multiSWERowsDir = "../../../shared/datasets/multi-swe-bench"

// multiSWEInstance is a Multi-SWE-bench row of repo with number, as the
// table sees it.
func multiSWEInstance(repo string, number int64) dataset.Instance {
	org, name, _ := strings.Cut(repo, "/")
	return dataset.Instance{
		InstanceID: fmt.Sprintf("%s__%s-%d", org, name, number), Repo: repo, Source: dataset.MultiSWEBench,
		MultiSWE: &dataset.MultiSWE{Org: org, Name: name, Number: number},
	}
}

// TestMultiSWEBuiltin: every repository the grader knows has an entry;
// Resolve gives a row its repository's spec (non-Python, toolchains, no
// directives, its framework's parser), chosen by number where the
// harness's image or commands change with it; a repository not in the
// table has no spec.
func TestMultiSWEBuiltin(t *testing.T) {
	if got, want := MultiSWERepos(), slices.Sorted(maps.Keys(multiswe.Repos)); !slices.Equal(got, want) {
		t.Fatalf("table repositories %v, grader's %v", got, want)
	}
	for repo, fw := range multiswe.Repos {
		s, err := Resolve(multiSWEInstance(repo, 1000), nil)
		if err != nil {
			t.Errorf("%s: %v", repo, err)
			continue
		}
		if s.IsPython() || len(s.Toolchains) == 0 || s.Directives != DirectivesNone || s.TestCmd == "" || s.Install == "" {
			t.Errorf("%s: spec %+v", repo, s)
		}
		if s.LogParser != multiswe.ParserName(fw) {
			t.Errorf("%s: log_parser %q, want %q", repo, s.LogParser, multiswe.ParserName(fw))
		}
	}
	get := func(repo string, number int64) Spec {
		t.Helper()
		s, err := Resolve(multiSWEInstance(repo, number), nil)
		if err != nil {
			t.Fatalf("%s #%d: %v", repo, number, err)
		}
		return s
	}
	if s := get("catchorg/Catch2", 2187); !strings.Contains(s.Env["CXXFLAGS"], glibcHeader) || !strings.Contains(s.Install, glibcHeader) {
		t.Errorf("Catch2 #2187 (gcc 7 in the harness) without the glibc header: %+v", s)
	}
	if s := get("catchorg/Catch2", 1422); !strings.Contains(s.Env["CXXFLAGS"], "-Wno-redundant-move") {
		t.Errorf("Catch2 #1422 (gcc 7 in the harness) keeps GCC 12's -Wredundant-move: CXXFLAGS %q", s.Env["CXXFLAGS"])
	}
	if s := get("catchorg/Catch2", 2288); s.Env["CXXFLAGS"] != "" {
		t.Errorf("Catch2 #2288 with CXXFLAGS %q", s.Env["CXXFLAGS"])
	}
	if s := get("BurntSushi/ripgrep", 1016); s.Env["RUSTFLAGS"] != "-W semicolon_in_expressions_from_macros" || s.Env["LANG"] != "C.UTF-8" {
		t.Errorf("ripgrep #1016 (errored! in expression position) env %q", s.Env)
	}
	if s := get("BurntSushi/ripgrep", 1017); s.Env["RUSTFLAGS"] != "" {
		t.Errorf("ripgrep #1017 with RUSTFLAGS %q", s.Env["RUSTFLAGS"])
	}
	if s := get("google/gson", 1391); !strings.HasSuffix(s.TestCmd, gsonJava11+" "+surefireJRE) || !strings.HasSuffix(s.Install, surefireJRE+" || true") {
		t.Errorf("gson #1391 test command %q", s.TestCmd)
	}
	if s := get("google/gson", 1093); !strings.HasSuffix(s.TestCmd, gsonJava8+" "+surefireJRE) {
		t.Errorf("gson #1093 test command %q", s.TestCmd)
	}
	if s := get("google/gson", 1555); !strings.HasSuffix(s.TestCmd, gsonNoJDK17Profile+" "+surefireJRE) || !slices.Contains(s.Toolchains, "jre@11") {
		t.Errorf("gson #1555 test command %q, toolchains %q", s.TestCmd, s.Toolchains)
	}
	if s := get("fasterxml/jackson-core", 980); !strings.Contains(s.TestCmd, "-Dtest=com.fasterxml.jackson.failing.PerfBigDecimalToInteger968") ||
		!slices.Equal(s.PreInstall, []string{`sed -i "s/2.15.0-rc3-SNAPSHOT/2.15.4/g" pom.xml`}) {
		t.Errorf("jackson-core #980: %+v", s)
	}
	if s := get("fasterxml/jackson-core", 174); !slices.Equal(s.PreInstall, []string{`sed -i "s/2.15.0-rc2-SNAPSHOT/2.15.4/g" pom.xml`}) {
		t.Errorf("jackson-core #174 pre_install %q", s.PreInstall)
	}
	if s := get("mockito/mockito", 3424); !slices.Contains(s.Toolchains, "gradle") {
		t.Errorf("mockito toolchains %q: its build must fail for want of Gradle", s.Toolchains)
	}
	a, b := get("fmtlib/fmt", 1), get("fmtlib/fmt", 1)
	a.Env["LANG"] = "changed"
	if b.Env["LANG"] != "C.UTF-8" {
		t.Error("two resolved specs share their Env map")
	}
	if _, err := Resolve(multiSWEInstance("someone/else", 1), nil); !errors.Is(err, ErrNoSpec) {
		t.Errorf("repository not in the table: %v", err)
	}
}

// multiSWERow is what the harness's scripts depend on.
type multiSWERow struct {
	Org    string `json:"org"`
	Repo   string `json:"repo"`
	Number int64  `json:"number"`
	SHA    string `json:"sha"`
}

// harnessScripts asks testdata/multiswe_scripts.py (the multi-swe-bench
// package in MSB_TEST_MULTISWE) for each row's fix-run.sh.
func harnessScripts(t *testing.T, rows []multiSWERow) []string {
	t.Helper()
	if os.Getenv("MSB_TEST_MULTISWE") == "" {
		privtest.Skip(t, "MSB_TEST_MULTISWE is not set: make test sets it (make test-venv installs the multi-swe-bench package)")
	}
	py := privtest.Python(t, "testdata/multiswe_scripts.py")
	in, err := json.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join("testdata", "multiswe_scripts.py"))
	cmd.Stdin = strings.NewReader(string(in))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("multiswe_scripts.py (%s): %v\n%s", py, err, stderr.String())
	}
	var scripts []struct {
		FixRun string `json:"fix_run"`
	}
	if err := json.Unmarshal(out, &scripts); err != nil || len(scripts) != len(rows) {
		t.Fatalf("multiswe_scripts.py answered %d scripts for %d rows: %v", len(scripts), len(rows), err)
	}
	fix := make([]string, len(scripts))
	for i, s := range scripts {
		fix[i] = s.FixRun
	}
	return fix
}

// harnessTestCommand is what a fix-run.sh runs after applying the
// patches, its lines joined with && (the script runs under set -e).
func harnessTestCommand(script string) string {
	var cmds []string
	applied := false
	for _, l := range strings.Split(script, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#") || l == "set -e" || strings.HasPrefix(l, "cd /home/"):
		case strings.HasPrefix(l, "git apply"):
			applied = true
		case applied:
			cmds = append(cmds, l)
		}
	}
	return strings.Join(cmds, " && ")
}

// msbTestCommand is the harness's test command as msb runs it, with the
// differences docs/languages.md ("Toolchains") gives the reasons for.
func msbTestCommand(harness, repo string, number int64) string {
	cmd := strings.TrimSuffix(harness, " && codecov") // dayjs: an upload, its status unread
	switch {
	case repo == "catchorg/Catch2": // the image's path (a copy), no memory checker; keep the eval script's cwd
		cmd = strings.Replace(cmd, "cd build && ", "rm -rf /home/Catch2 && mkdir -p /home && cp -a /testbed /home/Catch2 && cd /home/Catch2/build && ", 1)
		cmd = "(" + strings.Replace(cmd, " ..", " -DMEMORYCHECK_COMMAND= ..", 1) + ")"
	case repo == "jqlang/jq": // no valgrind, as in the image
		cmd = strings.Replace(cmd, "--with-oniguruma=builtin", "--with-oniguruma=builtin --disable-valgrind", 1)
	case strings.HasPrefix(cmd, "cd build && "): // fmt: keep the eval script's cwd
		cmd = "(" + cmd + ")"
	case strings.HasPrefix(cmd, "./gradlew "): // mockito: the named Gradle, not the wrapper's download
		cmd = "gradle --offline " + strings.TrimPrefix(cmd, "./gradlew ")
	case strings.HasPrefix(cmd, "mvn "): // Maven offline, no colours; Java 6 and 8 sources on JDK 17; gson's tests on JRE 11
		cmd = "mvn -o -Dstyle.color=never " + strings.TrimPrefix(cmd, "mvn ")
		switch {
		case repo == "fasterxml/jackson-core":
			cmd += " " + java8OnJDK17
		case repo == "google/gson" && number <= 1093:
			cmd += " " + gsonJava8 + " " + surefireJRE
		case repo == "google/gson" && number <= 1391:
			cmd += " " + gsonJava11 + " " + surefireJRE
		case repo == "google/gson": // the tests on a Java 11 runtime, Maven as on JDK 11
			cmd += " " + gsonNoJDK17Profile + " " + surefireJRE
		}
	}
	return cmd
}

// TestMultiSWETableMatchesHarness: for every shared Multi-SWE-bench row,
// the test command of msb's spec is the one the harness's fix-run.sh
// runs after the patches (the package's own scripts, made for the row),
// changed only as docs/languages.md says; and every row gets a spec.
func TestMultiSWETableMatchesHarness(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(multiSWERowsDir, "*.jsonl"))
	if len(files) == 0 {
		privtest.Skip(t, "no Multi-SWE-bench rows in %s", multiSWERowsDir)
	}
	var insts []dataset.Instance
	for _, f := range files {
		got, rowErrs, err := dataset.Load(f, dataset.Filter{})
		if err != nil || len(rowErrs) > 0 {
			t.Fatalf("%s: %v %v", f, err, rowErrs)
		}
		insts = append(insts, got...)
	}
	rows := make([]multiSWERow, len(insts))
	for i, in := range insts {
		rows[i] = multiSWERow{Org: in.MultiSWE.Org, Repo: in.MultiSWE.Name, Number: in.MultiSWE.Number, SHA: in.BaseCommit}
	}
	scripts := harnessScripts(t, rows)
	for i, in := range insts {
		s, err := Resolve(in, nil)
		if err != nil {
			t.Errorf("%s: %v", in.InstanceID, err)
			continue
		}
		harness := harnessTestCommand(scripts[i])
		if harness == "" {
			t.Errorf("%s: no test command in the harness's fix-run.sh:\n%s", in.InstanceID, scripts[i])
			continue
		}
		if want := msbTestCommand(harness, in.Repo, in.MultiSWE.Number); s.TestCmd != want {
			t.Errorf("%s: test command %q, harness %q (as msb runs it: %q)", in.InstanceID, s.TestCmd, harness, want)
		}
	}
	t.Logf("%d rows: test commands equal to the harness's", len(insts))
}

// TestMultiSWEInstallFailsLoudly: every install step of the table is one
// command a line, so that a failing dependency step (go mod download,
// cargo fetch, npm install) fails the build under the build script's
// set -e instead of being committed as an environment without its
// dependencies: set -e ignores a failure on the left of &&.
func TestMultiSWEInstallFailsLoudly(t *testing.T) {
	for _, repo := range slices.Sorted(maps.Keys(multiSWETable)) {
		for _, e := range multiSWETable[repo] {
			for _, line := range append(slices.Clone(e.spec.PreInstall), strings.Split(e.spec.Install, "\n")...) {
				if strings.Contains(line, "&&") {
					t.Errorf("%s: install line %q: a failure left of && does not stop the build; put one command a line", repo, line)
				}
			}
		}
	}
}

// TestMultiSWECatch2RealPath: Catch2's test command builds in
// /home/Catch2 as a real directory holding /testbed's tree, so that the
// ApprovalTests script, which strips the real path of the repository
// (realpath) from the reporters' output, strips the path cmake compiled
// in (the logical one). The command's steps up to cmake run in a shell
// with /testbed and /home moved under a temporary directory; the build
// directory's physical path must be the logical one.
func TestMultiSWECatch2RealPath(t *testing.T) {
	root := t.TempDir()
	testbed, home := filepath.Join(root, "testbed"), filepath.Join(root, "home")
	if err := os.MkdirAll(filepath.Join(testbed, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(testbed, "patched.cpp"), []byte("// the patches\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, number := range []int64{2187, 2849} {
		s, err := Resolve(multiSWEInstance("catchorg/Catch2", number), nil)
		if err != nil {
			t.Fatal(err)
		}
		setup, _, ok := strings.Cut(strings.TrimPrefix(s.TestCmd, "("), " && cmake ")
		if !ok {
			t.Fatalf("#%d: no cmake step in %q", number, s.TestCmd)
		}
		setup = strings.NewReplacer("/testbed", testbed, "/home", home).Replace(setup)
		out, err := exec.Command("bash", "-c", setup+" && pwd -P").CombinedOutput()
		if err != nil {
			t.Fatalf("#%d: %s: %v\n%s", number, setup, err, out)
		}
		if got, want := strings.TrimSpace(string(out)), filepath.Join(home, "Catch2", "build"); got != want {
			t.Errorf("#%d: the build runs in %s physically, %s logically: ApprovalTests' paths would differ", number, got, want)
		}
		if _, err := os.Stat(filepath.Join(home, "Catch2", "patched.cpp")); err != nil {
			t.Errorf("#%d: the patched tree is not in /home/Catch2: %v", number, err)
		}
	}
}
