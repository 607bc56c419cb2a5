package grading

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// multilingualParse parses logs with SWE-bench Multilingual's own parsers:
// those of the swebench package in MSB_TEST_SWEBENCH_GRADING (5.0.2),
// run by MSB_TEST_PYTHON through testdata/multilingual/oracle.py.
func multilingualParse(t *testing.T, logs []harnessLog) []harnessMap {
	t.Helper()
	dir := os.Getenv("MSB_TEST_SWEBENCH_GRADING")
	if dir == "" {
		privtest.Skip(t, "MSB_TEST_SWEBENCH_GRADING is not set: make test sets it (make test-venv installs testdata/harness/requirements.txt)")
	}
	py := privtest.Python(t, "testdata/multilingual/oracle.py")
	var maps []harnessMap
	runScript(t, py, filepath.Join("testdata", "multilingual", "oracle.py"), logs, &maps, dir)
	if len(maps) != len(logs) {
		t.Fatalf("oracle.py answered %d maps for %d logs", len(maps), len(logs))
	}
	return maps
}

// Fragments of the lines multilingualLog makes: what go test, libtest,
// Maven, Gradle, Ant, PHPUnit, minitest, test-unit, RSpec, cucumber, Jest,
// Vitest, TAP, Karma, the redis and micropython runners, jq, GoogleTest and
// doctest print, and what trips a port (space-like runes, word runes
// outside ASCII, colour codes, brackets, statuses glued to words).
var (
	mlWords = []string{"--- PASS:", "--- FAIL:", "--- SKIP:", "TestA", "TestB/sub_case", "(0.00s)", "(1s)", "(", ")",
		"test", "tests::a", "a::b::c", "...", "ok", "FAILED", "ignored", "-Dtest=FooTest", "-Dtest=Bar#baz",
		"+ mvn test", "BUILD SUCCESS", "BUILD FAILURE", "[INFO]", "com.a.FooTest > testX", ">", "PASSED", "SKIPPED",
		"[junit]", "[PASS]", "[FAIL]", "[ERR]", "Suite Name (A\\B\\C)", "✔", "✘", "↩", "✓", "✕", "○", "×", "↓", "✖",
		"(12 ms)", "(3ms)", "12 ms", "[skipped]", "not ok", "1", "42", "# skip", "[ok]:", "[err]:", "[skip]:",
		"[ignore]:", "in tests/unit/a.tcl", "(12 ms)", "PASS:", "FAIL:", "pass", "skip", "[       OK ]", "[  FAILED  ]",
		"[ OK ]", "Foo.Bar", "test_x.", "=", "0.00 s =", "E", "F", "O", ".", "test: ", "a test:", "passed", "failed",
		"pending", " - ", "Scenario", "....", "..F", "Starting browser", "SUMMARY:", "  describe", "    it",
		"é", "名", "٣", "Ⅻ", "_", "\x1b[32m", "\x1b[0m", "=>", "::"}
	mlSeps = []string{" ", " ", " ", "  ", "\t", " - ", "", "\u00a0", "\u2003", "\u0085", "\x1c", "\f", "\v"}
	mlEnds = []string{"\n", "\n", "\n", "\r\n", "\r", " \n"}
)

// mlShapes are whole lines as the frameworks print them, with %s where
// multilingualLog puts a run of fragments.
var mlShapes = []string{"--- PASS: %s (0.01s)", "--- FAIL: %s (%s)", "--- SKIP: %s (0.00s)", "test %s ... ok",
	"test %s ... FAILED", "test %s ... %s", "[junit] [PASS] %s", "[junit] [ERR] %s", "[PASSED] %s", "[FAILED] %s",
	"ok 1 %s", "not ok 12 %s", "ok %s", "+ mvn test -Dtest=%s", "[INFO] BUILD SUCCESS", "[ERROR] BUILD FAILURE",
	"%s > %s PASSED", "%s > %s", "FAILED", "PASSED", "[ok]: %s (3 ms)", "[err]: %s in %s", "✓ %s (%s)", "× %s %s",
	"$ ./node_modules/.bin/jest %s", "  %s", "    ✓ %s (12ms)", "    ✕ %s", "Test Suites: %s", "  ● %s",
	"Chrome 120.0.1 (Linux x86_64) %s FAILED", "HeadlessChrome 99 (Mac) %s FAILED", "1) %s", "  12) %s:",
	"PASS %s (1.2 s)", "FAIL %s (35 ms)", "PASS %s (2s)", "{", "}", "[", "]", "{ %s }", "<div>%s</div>", "<p>%s", "</p>"}

// multilingualLog makes a log of one to eight lines, each either a shape
// of mlShapes filled with fragments or fragments alone, indented by zero
// to six spaces.
func multilingualLog(r *rand.Rand) string {
	var b strings.Builder
	for range 1 + r.IntN(8) {
		b.WriteString(strings.Repeat(" ", r.IntN(4)*2))
		if r.IntN(2) == 0 {
			shape := mlShapes[r.IntN(len(mlShapes))]
			var fill []any
			for range strings.Count(shape, "%s") {
				fill = append(fill, mlFragments(r, 1+r.IntN(3)))
			}
			b.WriteString(fmt.Sprintf(shape, fill...))
			b.WriteString(mlEnds[r.IntN(len(mlEnds))])
			continue
		}
		b.WriteString(mlFragments(r, 1+r.IntN(5)))
		b.WriteString(mlEnds[r.IntN(len(mlEnds))])
	}
	return b.String()
}

// mlFragments joins n random fragments with random separators.
func mlFragments(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(mlSeps[r.IntN(len(mlSeps))])
		}
		b.WriteString(mlWords[r.IntN(len(mlWords))])
	}
	return b.String()
}

// doctestLogs are doctest -r=xml reports around the cases the port must
// agree on: nested subcases, a subcase without expressions, a missing
// name, a failed expression, text before and after, and broken XML.
var doctestLogs = []string{
	`+ ./tests/test-a -s -r=xml
<?xml version="1.0" encoding="UTF-8"?>
<doctest binary="tests/test-a">
  <Options order_by="file" rand_seed="0"/>
  <TestSuite>
    <TestCase name="parse" filename="a.cpp" line="10">
      <SubCase name="empty" filename="a.cpp" line="12">
        <Expression success="true" type="CHECK"><Original>x</Original></Expression>
        <SubCase name="nested" filename="a.cpp" line="14">
          <Expression success="false" type="CHECK"><Original>y</Original></Expression>
        </SubCase>
      </SubCase>
      <SubCase name="no checks"/>
      <SubCase filename="a.cpp"><Expression success="true"/></SubCase>
      <OverallResultsAsserts successes="1" failures="1"/>
    </TestCase>
    <TestCase filename="b.cpp"><SubCase name="s &amp; t"><Expression success="TRUE"/></SubCase></TestCase>
  </TestSuite>
  <OverallResultsAsserts successes="1" failures="1"/>
</doctest>
done`,
	"<doctest><TestCase name='a'><SubCase name='b'/></TestCase></doctest>",
	"<doctest><TestCase name='a'><SubCase name='b'></TestCase></doctest>",
	"<doctest/>",
	"x <doctest> <TestCase name='a'> </doctest>",
	"<doctest><TestCase name='a'><SubCase name='&bogus;'/></TestCase></doctest>",
}

// multimodalLogs are logs of the shapes calypso's, p5.js's and Chart.js's
// parsers walk: nested describe blocks, a summary, XML and JSON blocks
// around numbered failures, Karma's browser lines.
var multimodalLogs = []string{
	"> npm run test-client -- ./node_modules/.bin/jest --verbose\n  components\n    button\n      ✓ renders (5ms)\n      ✕ clicks\n" +
		"    input\n      ✓ types (12ms) x\n  other\n    ✓ works\nTest Suites: 1 failed\n  ✓ after the summary\n" +
		"x ./node_modules/.bin/jest y\n\t✓ tabbed (3ms)\n   deep\n ✕ shallow (1ms)\n",
	"  1) Core\n       draws:\n     Error: <div><div>a</div></div>\n  2) Core\n  flat:\n{\n  \"a\": 1\n}\n" +
		"  3) [\n  x\n]\n  4) Renderer\n      <p>uses</p>\n        webgl:\n<b>x</b> 5) a\n   b\n      c:\n" +
		"  6) t <i><i>x</i></i>\n     u:\n",
	"Chrome 120.0 (Linux x86_64) Chart.helpers works FAILED\n\x1b[31mChrome 99.1 (Mac OS) Chart scale FAILED\x1b[0m\n" +
		"Chrome 1 (a)\nb FAILED\nChrome 1.2\t(x) (y) z FAILED\n",
}

// TestMultilingualParsersMatchHarness gives the same logs to each port and
// to the swebench package's function of the same name: the real logs of
// testdata/multilingual (made here by go test -v, cargo test, Maven 3.8
// with Surefire run per test under set -x, Jest --verbose and --json
// through the harness's jq transform, node --test's TAP reporter,
// GoogleTest under ctest -V as fmt's command runs it), the doctest
// reports and multimodal logs above and 4000 random logs, each to every
// parser. The status maps must be equal, key for key and status for
// status. A log on which the harness's parser raises (its evaluation
// would stop there) is not compared.
func TestMultilingualParsersMatchHarness(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "multilingual", "*.log"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no logs in testdata/multilingual: %v", err)
	}
	texts := append(append([]string(nil), doctestLogs...), multimodalLogs...)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(b))
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 4000 {
		texts = append(texts, multilingualLog(r))
	}
	names := MultilingualParserNames()
	if len(names) == 0 {
		t.Fatal("no multilingual parsers registered")
	}
	var logs []harnessLog
	for _, text := range texts {
		for _, p := range names {
			logs = append(logs, harnessLog{Parser: p, Log: text})
		}
	}
	want := multilingualParse(t, logs)
	raised, differ := 0, 0
	nonEmpty := map[string]int{}
	for i, l := range logs {
		if want[i].Error != "" {
			raised++
			continue
		}
		got := map[string]string{}
		for name, st := range multilingualParsers[l.Parser](l.Log) {
			got[name] = string(st)
		}
		if want[i].Map == nil {
			want[i].Map = map[string]string{}
		}
		if len(want[i].Map) > 0 {
			nonEmpty[l.Parser]++
		}
		if !reflect.DeepEqual(got, want[i].Map) {
			if differ++; differ <= 20 {
				t.Errorf("%s parser on %q:\n%s", l.Parser, clip(l.Log), mapDiff(got, want[i].Map))
			}
		}
	}
	for _, p := range names {
		if nonEmpty[p] == 0 {
			t.Errorf("no log gave the %s parser a status: the comparison proves nothing for it", p)
		}
	}
	t.Logf("%d logs compared, %d differ; the harness's parser raised on %d; with a status, by parser: %v",
		len(logs)-raised, differ, raised, nonEmpty)
}

// runScript runs a Python script under py with args, in as JSON on its
// stdin, and decodes its stdout into out.
func runScript(t *testing.T, py, script string, in, out any, args ...string) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, append([]string{script}, args...)...)
	cmd.Stdin = bytes.NewReader(b)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	res, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v (%s): %v\n%s", script, args, py, err, stderr.Bytes())
	}
	if err := json.Unmarshal(res, out); err != nil {
		t.Fatalf("%s %v answered: %v", script, args, err)
	}
}
