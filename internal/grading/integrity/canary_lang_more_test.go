package integrity_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/grading/integrity"
	"github.com/minisandbox/msb/internal/privtest"
)

// TestMavenCanaryCommand: the Maven canary runs the instance's own Maven
// command with its test selection replaced by the two canary classes.
func TestMavenCanaryCommand(t *testing.T) {
	const file = "gson/src/test/java/com/google/gson/AddTest.java"
	for _, tc := range []struct{ cmd, want string }{
		{"mvn -o -Dstyle.color=never clean test -Dmaven.test.skip=false -DfailIfNoTests=false",
			"mvn -o -Dstyle.color=never clean test -Dmaven.test.skip=false"},
		{"mvn -o clean test -Dsurefire.useFile=false -Dtest=com.x.Perf968 -DfailIfNoTests=false -am",
			"mvn -o clean test -Dsurefire.useFile=false -am"},
		{"cd gson && mvnd test -B -pl gson -Dtest=com.google.gson.functional.PrimitiveTest#testByte",
			"cd gson && mvnd test -B -pl gson"},
		{"mvn install -DskipTests\n./mvnw test -B -Dsurefire.failIfNoSpecifiedTests=true", "./mvnw test -B"},
	} {
		c := integrity.NewCanary(tc.cmd, []string{"README.md", file})
		want := tc.want + " -Dtest=" + c.Pass + "," + c.Fail + " -DfailIfNoTests=false -Dsurefire.failIfNoSpecifiedTests=false"
		if !c.Active() || c.Command != want || !strings.Contains(c.Script(), "'"+file+"'") {
			t.Errorf("%s:\n got %q\nwant %q", tc.cmd, c.Command, want)
		}
		for _, n := range []string{c.Pass, c.Fail} {
			if !strings.HasSuffix(n, "Test") || strings.Contains(strings.ToLower(n), "msb") || strings.Contains(n, c.Token) {
				t.Errorf("class name %q", n)
			}
		}
	}
	if c := integrity.NewCanary("mvn test && echo done", []string{file}); c.Active() || !strings.HasPrefix(c.Note, "canary skipped: ") {
		t.Errorf("Maven not last: %+v", c)
	}
}

// TestJSCanaryJudge: Jest's suite line of the canary's file is the
// failing canary's, not a test that did not run.
func TestJSCanaryJudge(t *testing.T) {
	c := integrity.NewCanary("npm test -- --verbose", []string{"test/add.test.js"})
	suite := "test/" + c.File + ".test.js"
	statuses := map[string]string{suite: "FAILED", suite + ":" + c.Pass: "PASSED", suite + ":" + c.Fail: "FAILED"}
	if got := c.Judge(statuses, true); len(got) != 0 {
		t.Fatalf("honest run: %q", got)
	}
	statuses[suite+":"+c.Fail] = "PASSED"
	statuses["test/add.test.js:adds"] = "PASSED"
	if got := c.Judge(statuses, true); len(got) != 2 {
		t.Fatalf("faked run: %q", got)
	}
}

// TestJSCanaryHelper runs the JavaScript canary's script with real node
// in repositories whose node_modules/.bin/jest, mocha and vitest are stand-ins
// that print the arguments they get and the canary file: the helper finds
// the runner through npm scripts and keeps its options but not its test
// selection, writes the canary beside the test file in the file's module
// style, and leaves no file behind; a command with neither runner is
// skipped.
func TestJSCanaryHelper(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		privtest.Skip(t, "node not found")
	}
	dayjs := `{"test": "cross-env TZ=Pacific/Auckland npm run test-tz && jest --coverage --coverageThreshold=\"{ \\\"global\\\": { \\\"lines\\\": 100} }\"", "test-tz": "date && jest test/timezone.test --coverage=false"}`
	for _, tc := range []struct {
		name, scripts, typ, cmd, file string
		runner                        string
		args                          []string // before the canary's own
		loads                         string   // what the canary loads, "" for nothing
	}{
		{name: "dayjs", scripts: dayjs, cmd: "npm test -- --verbose", file: "test/plugin/a.test.js", runner: "jest",
			args: []string{}, loads: "require(m);"},
		{name: "darkreader", scripts: `{"test:ci": "npm run test:unit", "test:unit": "jest --config=tests/unit/jest.config.mjs"}`,
			cmd: "npm run test:ci -- --json --outputFile=test-results-unit.json", file: "tests/unit/utils/a.tests.ts", runner: "jest",
			args: []string{"--config=tests/unit/jest.config.mjs"}},
		{name: "axios", scripts: `{"test": "npm run test:mocha", "test:mocha": "node bin/ssl_hotfix.js mocha test/unit/**/*.js --timeout 30000 --exit"}`,
			typ: "module", cmd: "npm test -- --reporter console", file: "test/unit/a.js", runner: "mocha",
			args: []string{"--timeout", "30000", "--exit", "--reporter", "console"}, loads: "await import(m);"},
		{name: "axios multilingual", typ: "module", cmd: "npx mocha test/unit/adapters/http.js -R tap -g 'FormData'", file: "test/unit/adapters/http.js",
			runner: "mocha", args: []string{"-R", "tap"}, loads: "await import(m);"},
		{name: "jest -t", cmd: "npx jest __tests__/Range.ts -t 'some name' --verbose", file: "__tests__/Range.ts", runner: "jest", args: []string{}},
		{name: "vuejs/core vitest", scripts: `{"test": "vitest"}`, cmd: "pnpm run test packages/runtime-core/__tests__/hydration.spec.ts --no-watch --reporter=verbose -t \"mismatch handling\"",
			file: "packages/runtime-core/__tests__/hydration.spec.ts", runner: "vitest", args: []string{"--reporter=verbose"}},
		{name: "vitest, no reporter", scripts: `{"test": "vitest run --coverage"}`, cmd: "npm test -- test/a.test.js", file: "test/a.test.js", runner: "vitest",
			args: []string{"--reporter=verbose"}, loads: "await import(m);"},
		{name: "karma", scripts: `{"test": "karma start karma.conf.js --single-run"}`, cmd: "npm test", file: "test/a.test.js"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pkg := `{"name": "x", "version": "1.0.0"`
			if tc.scripts != "" {
				pkg += `, "scripts": ` + tc.scripts
			}
			if tc.typ != "" {
				pkg += `, "type": "` + tc.typ + `"`
			}
			stub := "#!/usr/bin/env node\nconst fs = require('fs');\nconst a = process.argv.slice(2);\n" +
				"console.log('STUB ' + JSON.stringify({ argv: a, src: fs.readFileSync(a[a.length - 1], 'utf8') }));\n"
			writeTree(t, dir, map[string]string{
				"package.json": pkg + "}\n",
				tc.file:        "import { add } from '../calc.js';\nconst x = require(\"./helpers/x\");\n",
			})
			for _, r := range []string{"jest", "mocha", "vitest"} {
				writeTree(t, dir, map[string]string{"node_modules/.bin/" + r: stub})
				if err := os.Chmod(filepath.Join(dir, "node_modules/.bin", r), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			c := integrity.NewCanary(tc.cmd, []string{tc.file})
			if !c.Active() {
				t.Fatalf("not active: %+v", c)
			}
			cmd := exec.Command("bash", "-c", c.Script())
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			run, ok := c.Output(string(out))
			if !ok {
				t.Fatalf("no markers:\n%s", out)
			}
			if tc.runner == "" {
				if c.Skipped(run) == "" {
					t.Fatalf("not skipped:\n%s", out)
				}
				return
			}
			_, got, ok := strings.Cut(run, "STUB ")
			if !ok {
				t.Fatalf("runner not run:\n%s", out)
			}
			var rec struct {
				Argv []string
				Src  string
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(got)), &rec); err != nil {
				t.Fatal(err)
			}
			base := filepath.Base(tc.file)
			ext := base[strings.Index(base, "."):]
			canary := filepath.Join(filepath.Dir(tc.file), c.File+ext)
			want := append(tc.args, "--verbose", "--coverage=false", canary)
			switch tc.runner {
			case "mocha":
				want = append(tc.args, "--grep", "^("+c.Pass+"|"+c.Fail+")$", canary)
			case "vitest":
				want = append(append([]string{"run"}, tc.args...), "--coverage.enabled=false", "-t", "^("+c.Pass+"|"+c.Fail+")$", canary)
			}
			if !slices.Equal(rec.Argv, want) {
				t.Errorf("argv %q, want %q", rec.Argv, want)
			}
			if !strings.Contains(rec.Src, "'"+c.Pass+"'") || !strings.Contains(rec.Src, "'"+c.Fail+"'") || strings.Contains(rec.Src, c.Token) ||
				strings.Contains(strings.ToLower(rec.Src), "msb") || !strings.Contains(rec.Src, tc.loads) {
				t.Errorf("canary source:\n%s", rec.Src)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, filepath.Dir(tc.file), c.File+"*")); len(left) > 0 {
				t.Errorf("canary file left: %v", left)
			}
		})
	}
}

// writeTree writes files (path relative to dir: content) under dir.
// runCanary runs c's script in dir, with env added to the test's own, and
// returns the whole log and the canary's part of it; a log without the
// canary's markers fails the test.
func runCanary(t *testing.T, c integrity.Canary, dir string, env ...string) (log, out string) {
	t.Helper()
	cmd := exec.Command("bash", "-c", c.Script())
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	b, _ := cmd.CombinedOutput()
	out, ok := c.Output(string(b))
	if !ok {
		t.Fatalf("no canary markers in:\n%s", b)
	}
	return string(b), out
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
