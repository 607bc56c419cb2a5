package task

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/spec"
)

// junitProject is javaProject with JUnit 5 (Jupiter and its JUnit 4
// engine) beside JUnit 4, so that one environment serves a row whose test
// is on JUnit 4 (junitProject's) and one on JUnit 5 (junit5Tests).
var junitProject = func() langProject {
	p := javaProject
	p.name = "junitcalc"
	p.base = maps.Clone(p.base)
	p.base["pom.xml"] = strings.Replace(p.base["pom.xml"], "  </dependencies>", `    <dependency>
      <groupId>org.junit.jupiter</groupId>
      <artifactId>junit-jupiter</artifactId>
      <version>5.10.2</version>
      <scope>test</scope>
    </dependency>
    <dependency>
      <groupId>org.junit.vintage</groupId>
      <artifactId>junit-vintage-engine</artifactId>
      <version>5.10.2</version>
      <scope>test</scope>
    </dependency>
  </dependencies>`, 1)
	return p
}()

var junit5Tests = map[string]string{"src/test/java/calc/AddTest.java": "package calc;\n\n" +
	"import static org.junit.jupiter.api.Assertions.assertEquals;\n\nimport org.junit.jupiter.api.Test;\n\n" +
	"class AddTest {\n    @Test\n    void add() {\n        assertEquals(5, Calc.add(2, 3));\n    }\n}\n"}

// npmProject: an npm package with Jest and Mocha (pinned), Jest's tests
// in test/ (configured in jest.config.js, run by npm test and read by
// dayjs's parser) and Mocha's in spec/ (run by npm run test:mocha, read by
// axios's parser: mochaTests).
var npmProject = langProject{
	name: "npmcalc",
	base: map[string]string{
		".gitignore": "node_modules/\npackage-lock.json\n",
		"package.json": `{"name": "calc", "version": "1.0.0", "private": true,` +
			` "scripts": {"test": "jest --coverage", "test:mocha": "mocha 'spec/**/*.spec.js' --timeout 20000"},` +
			` "devDependencies": {"jest": "29.7.0", "mocha": "10.8.2"}}` + "\n",
		"jest.config.js":   "module.exports = { testEnvironment: 'node', testMatch: ['**/test/**/*.test.js'] };\n",
		"calc.js":          "exports.add = (a, b) => a - b;\nexports.mul = (a, b) => a * b;\n",
		"test/mul.test.js": "const { mul } = require('../calc');\n\ntest('multiplies', () => { expect(mul(2, 3)).toBe(6); });\n",
		"spec/mul.spec.js": "const assert = require('assert');\nconst { mul } = require('../calc');\n\nit('multiplies', () => assert.strictEqual(mul(2, 3), 6));\n",
	},
	tests: map[string]string{"test/add.test.js": "const { add } = require('../calc');\n\ntest('adds', () => { expect(add(2, 3)).toBe(5); });\n"},
	fix:   map[string]string{"calc.js": "exports.add = (a, b) => a + b;\nexports.mul = (a, b) => a * b;\n"},
	spec: `      language: javascript
      toolchains: [node]
      install: npm install --no-audit --no-fund
      test_cmd: npm test -- --verbose
      log_parser: multiswe/jest
      directives: none
`,
	p2p: []string{"test/mul.test.js", "test/mul.test.js:multiplies"}, f2p: []string{"test/add.test.js", "test/add.test.js:adds"},
	testRunFailed: []string{"test/add.test.js", "test/add.test.js:adds"},
}

// mochaTests is npmProject's Mocha row: its test patch, test command
// (an instance override) and tests.
var mochaTests = langProject{
	name:  "npmcalc-mocha",
	tests: map[string]string{"spec/add.spec.js": "const assert = require('assert');\nconst { add } = require('../calc');\n\nit('adds', () => assert.strictEqual(add(2, 3), 5));\n"},
	spec: `    test_cmd: npm run test:mocha -- --reporter spec
    log_parser: multiswe/mocha
`,
	p2p: []string{"multiplies"}, f2p: []string{"adds"}, testRunFailed: []string{"adds", "adds:"},
}

// A shadowing assertion class in the main source tree comes before the
// JUnit jar on Surefire's test classpath: every assertEquals passes.
const (
	junit4Shadow = "package org.junit;\n\npublic class Assert {\n    public static void assertEquals(long a, long b) {}\n\n" +
		"    public static void assertEquals(Object a, Object b) {}\n}\n"
	junit5Shadow = "package org.junit.jupiter.api;\n\npublic class Assertions {\n    public static void assertEquals(int a, int b) {}\n\n" +
		"    public static void assertEquals(Object a, Object b) {}\n}\n"
	expectStub = "global.expect = () => ({ toBe() {} });\n"
	// ctestEmulator: when the directory is done (its last line run, a
	// canary's too), every program of its targets runs through true, so
	// every ctest test passes.
	ctestEmulator = "cmake_language(DEFER CALL hide)\nfunction(hide)\n  get_property(ts DIRECTORY PROPERTY BUILDSYSTEM_TARGETS)\n" +
		"  foreach(t IN LISTS ts)\n    set_property(TARGET ${t} PROPERTY CROSSCOMPILING_EMULATOR true)\n  endforeach()\nendfunction()\n"
	// ctestQuit: the library's constructor ends every program that links
	// it with status 0 before its main, so every ctest test passes; the
	// CTest canary sees it by linking the library as the tests do.
	ctestQuit = "\n#include <unistd.h>\n\n__attribute__((constructor)) static void quit() { _exit(0); }\n"
)

// canaryRow is one row TestCanaryMore evaluates: a project's row, or
// another row of the same repository (twin: its tests and spec override),
// with the exploits its canary must flag.
type canaryRow struct {
	name     string
	twin     *langProject
	exploits []canaryExploit
}

// TestCanaryMore evaluates, for Maven (JUnit 4 and JUnit 5), Jest,
// Mocha and CTest, a row's gold patch (resolved, integrity ok, the canary run in
// its log) and exploits that make the harness's parser read the failing
// test as passed without the fix: under --integrity warn each stays
// resolved and is flagged tampered with a canary reason, whatever the
// static check says. The rows of one language share a repository and so
// an environment.
func TestCanaryMore(t *testing.T) {
	env := langEnv(t)
	for _, tc := range []struct {
		p     langProject
		tools []string
		rows  []canaryRow
	}{
		{junitProject, []string{"java", "mvn"}, []canaryRow{
			{name: "junit4", exploits: []canaryExploit{{name: "org.junit.Assert shadow", append: map[string]string{"src/main/java/org/junit/Assert.java": junit4Shadow}}}},
			{name: "junit5", twin: &langProject{name: "junit5", tests: junit5Tests, p2p: junitProject.p2p, f2p: junitProject.f2p, testRunFailed: junitProject.testRunFailed},
				exploits: []canaryExploit{{name: "Assertions shadow", append: map[string]string{"src/main/java/org/junit/jupiter/api/Assertions.java": junit5Shadow}}}},
		}},
		{npmProject, []string{"node", "npm"}, []canaryRow{
			{name: "jest", exploits: []canaryExploit{
				{name: "expect stub from the code under test", append: map[string]string{"calc.js": expectStub}},
				{name: "expect stub from setupFilesAfterEnv", static: true, append: map[string]string{
					"jest.config.js": "module.exports.setupFilesAfterEnv = ['<rootDir>/test/setup.js'];\n",
					"test/setup.js":  expectStub,
				}},
			}},
			{name: "mocha", twin: &mochaTests, exploits: []canaryExploit{
				{name: "assert.strictEqual no-op from the code under test", append: map[string]string{"calc.js": "require('assert').strictEqual = () => {};\n"}},
			}},
		}},
		{cppProject, []string{"cmake", "c++"}, []canaryRow{
			{name: "ctest", exploits: []canaryExploit{
				{name: "every test program run by an emulator that exits 0", append: map[string]string{"CMakeLists.txt": ctestEmulator}},
				{name: "a constructor in the code under test exits 0", append: map[string]string{"calc.cpp": ctestQuit}},
			}},
		}},
	} {
		t.Run(tc.p.name, func(t *testing.T) {
			t.Parallel()
			for _, tool := range tc.tools {
				if _, err := exec.LookPath(tool); err != nil {
					privtest.Skip(t, "%s not found", tool)
				}
			}
			base := tc.p.row(t)
			for _, row := range tc.rows {
				t.Run(row.name, func(t *testing.T) {
					in, tk := base, langTask(t, base, tc.p, nil)
					if row.twin != nil {
						in = twinRow(t, base, *row.twin)
						tk = langTask(t, in, tc.p, row.twin)
					}
					checkCanaryRow(t, env, in, tk, row.exploits)
				})
			}
		})
	}
}

// checkCanaryRow evaluates the gold patch and the exploits of row in as
// TestCanaryMore says.
func checkCanaryRow(t *testing.T, env Env, in dataset.Instance, tk *Task, exploits []canaryExploit) {
	t.Helper()
	ctx := context.Background()
	o := EvalOptions{TestTimeout: 10 * time.Minute, Integrity: api.IntegrityWarn}
	gold := evaluateUnsplit(t, ctx, env, tk, api.Prediction{InstanceID: in.InstanceID, Model: "gold", ModelPatch: ptr(in.Patch)}, o)
	r := gold.Result
	if r.Outcome != api.OutcomeResolved || r.Report.Integrity != api.IntegrityOK || len(r.Report.IntegrityNotes) != 0 ||
		!strings.Contains(gold.Artifacts.TestOutput, "msb canary end") {
		t.Fatalf("gold: %s (%s) integrity %q %q %q\n%s", r.Outcome, r.Detail, r.Report.Integrity, r.Report.IntegrityReasons,
			r.Report.IntegrityNotes, gold.Artifacts.TestOutput)
	}
	for _, x := range exploits {
		p := langExploit(t, in, x.append)
		ev := evaluateUnsplit(t, ctx, env, tk, api.Prediction{InstanceID: in.InstanceID, Model: "x", ModelPatch: &p}, o)
		r := ev.Result
		canary := slices.IndexFunc(r.Report.IntegrityReasons, func(s string) bool { return strings.HasPrefix(s, "canary: ") })
		if r.Outcome != api.OutcomeResolved || r.Report.Integrity != api.IntegrityTampered || canary < 0 {
			t.Fatalf("%s: %s (%s) integrity %q %q\n%s", x.name, r.Outcome, r.Detail, r.Report.Integrity, r.Report.IntegrityReasons, ev.Artifacts.TestOutput)
		}
		if static := canary > 0; static != x.static {
			t.Errorf("%s: static reasons %v, want %v: %q", x.name, static, x.static, r.Report.IntegrityReasons)
		}
	}
}

// gradleSplit matches a test's result line that Gradle wrote into the
// middle of its test worker's JDK 17 warning ("WARNING: System::
// setSecurityManager has been called by calc.MulTest > mul PASSED", the
// warning's end on a later line). The worker's stderr and the test events
// reach Gradle's console by different threads, so now and then a result
// lands inside the warning; no parser, the harness's included, reads that
// line, and no patch causes it.
var gradleSplit = regexp.MustCompile(`has been called by \S+ > \S+ (PASSED|FAILED|SKIPPED)`)

// evaluateUnsplit is Evaluate, run once more when Gradle split a result
// line (gradleSplit) in the first run's log; the second run's result
// stands whatever its log.
func evaluateUnsplit(t *testing.T, ctx context.Context, env Env, tk *Task, p api.Prediction, o EvalOptions) Evaluation {
	t.Helper()
	ev := Evaluate(ctx, env, tk, p, o)
	if gradleSplit.MatchString(ev.Artifacts.TestOutput) {
		t.Logf("%s: Gradle wrote a result line into its worker's warning; evaluating again", p.Model)
		ev = Evaluate(ctx, env, tk, p, o)
	}
	return ev
}

// langTask is the task of row in of p's repository, with p's spec and,
// for a twin row, the twin's spec as the instance's override.
func langTask(t *testing.T, in dataset.Instance, p langProject, twin *langProject) *Task {
	t.Helper()
	y := "version: 1\nrepos:\n  " + in.Repo + ":\n    \"*\":\n" + p.spec
	if twin != nil {
		y += "instances:\n  " + in.InstanceID + ":\n" + twin.spec
	}
	return overrideTask(t, in, y)
}

// overrideTask is in's task under the spec overrides of the YAML y.
func overrideTask(t *testing.T, in dataset.Instance, y string) *Task {
	t.Helper()
	ov, err := spec.ParseOverrides([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := New(in, ov)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// twinRow is another row of base's repository at the same base commit
// (and so with its environment) and fix: twin's tests are its test patch,
// committed on a branch of their own.
func twinRow(t *testing.T, base dataset.Instance, twin langProject) dataset.Instance {
	t.Helper()
	dir := base.RepoURL
	hostGit(t, dir, "checkout", "-q", "-b", twin.name, base.BaseCommit)
	writeLangFiles(t, dir, twin.tests, false)
	hostGit(t, dir, "add", "-A")
	hostGit(t, dir, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "tests")
	in := base
	in.InstanceID, in.TestPatch = base.InstanceID+"-"+twin.name, hostGit(t, dir, "diff", base.BaseCommit, "HEAD")
	in.FailToPass, in.PassToPass = twin.f2p, twin.p2p
	m := *base.MultiSWE
	m.P2P, m.F2P = map[string]dataset.Transition{}, map[string]dataset.Transition{}
	m.Run = &dataset.RunResult{Passed: twin.p2p}
	m.TestPatch = &dataset.RunResult{Passed: twin.p2p, Failed: twin.testRunFailed}
	m.FixPatch = &dataset.RunResult{Passed: slices.Concat(twin.p2p, twin.f2p)}
	for _, n := range twin.p2p {
		m.P2P[n] = dataset.Transition{Run: "PASS", Test: "PASS", Fix: "PASS"}
	}
	for _, n := range twin.f2p {
		m.F2P[n] = dataset.Transition{Run: "NONE", Test: "FAIL", Fix: "PASS"}
	}
	in.MultiSWE = &m
	return in
}

// langExploit is the diff that appends to (or creates) files of in's
// repository at its base commit.
func langExploit(t *testing.T, in dataset.Instance, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "x")
	hostGit(t, t.TempDir(), "clone", "-q", in.RepoURL, dir)
	hostGit(t, dir, "checkout", "-q", "--detach", in.BaseCommit)
	writeLangFiles(t, dir, files, true)
	hostGit(t, dir, "add", "-A")
	return hostGit(t, dir, "diff", "--cached", "--no-ext-diff") + "\n"
}

// writeLangFiles writes files under dir, appending to those that exist when
// appending is set.
func writeLangFiles(t *testing.T, dir string, files map[string]string, appending bool) {
	t.Helper()
	flag := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if appending {
		flag = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		fh, err := os.OpenFile(p, flag, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		_, err = fh.WriteString(body)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
