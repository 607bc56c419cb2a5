package multiswe

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// fragments are lines in the shapes each framework prints (and a few
// shapes that are almost right), for generated logs. Names recur so that
// one test gets several statuses.
var fragments = map[string][]string{
	FrameworkCargo: {"test a::b ... ok", "test a::b ... FAILED", "test c ... ignored", "  test d ... ok  ",
		"test e - should panic ... ok", "test src/lib.rs - f (line 3) ... ok", "test a::b ... okay", "running 2 tests"},
	FrameworkGoTest: {"--- PASS: TestA (0.00s)", "--- FAIL: TestA/sub (0.01s)", "    --- PASS: TestA/one (0.00s)",
		"--- SKIP: TestB (0.00s)", "--- FAIL: TestB (0.00s)", "FAIL\texample.com/x/y\t0.02s", "FAIL: TestC ", "FAIL",
		"ok  \texample.com/x\t0.01s", "--- PASS: TestB (0.00s)", "--- SKIP: TestA/sub (0.00s)"},
	FrameworkSurefire: {"[INFO] Tests run: 3, Failures: 0, Errors: 0, Skipped: 0, Time elapsed: 0.12 s - in com.x.FooTest",
		"[ERROR] Tests run: 2, Failures: 1, Errors: 0, Skipped: 0, Time elapsed: 0.01 s <<< FAILURE! - in com.x.Bar",
		"\x1b[1;31mTests run: 1, Failures: 0, Errors: 1, Skipped: 0, Time elapsed: 1.5 s\x1b[m - in com.x.Baz",
		"Tests run: 4, Failures: 0, Errors: 0, Skipped: 4, Time elapsed: 0 s - in com.x.Skip",
		"Tests run: 0, Failures: 0, Errors: 0, Skipped: 0, Time elapsed: 0.001 s - in com.x.Empty",
		"Tests run: 007, Failures: 00, Errors: 0, Skipped: 7, Time elapsed: 2.0 sec in com.x.FooTest",
		"Tests run: 5, Failures: 0, Errors: 0, Skipped: 0"},
	FrameworkSurefireRunning: {"Running com.google.gson.FooTest", "Running  com.google.gson.Bar  ", "Running",
		"Tests run: 5, Failures: 0, Errors: 0, Skipped: 0, Time elapsed: 0.05 sec",
		"Tests run: 2, Failures: 1, Errors: 0, Skipped: 0, Time elapsed: 0.01 sec <<< FAILURE!",
		"Tests run: 3, Failures: 0, Errors: 0, Skipped: 3, Time elapsed: 0 sec",
		"Tests run: 1, Failures: 0, Errors: 0, Skipped: 0, Time elapsed: 0.2 s", "[INFO] Tests run: 1, Failures: 0",
		"Tests run:  4,Failures: 0, Errors: 2, Skipped: 0, Time elapsed:1.0sec", "", "   ", "noise Running x.Y"},
	FrameworkGradle: {"> Task :compileJava", "> Task :compileJava UP-TO-DATE", "> Task :test FAILED", "> Task :javadoc SKIPPED",
		"> Task :processResources NO-SOURCE", "org.mockito.FooTest > bar PASSED", "org.mockito.FooTest > bar FAILED",
		"org.mockito.FooTest > baz SKIPPED", "  org.mockito.FooTest > bar PASSED", "> Task :test"},
	FrameworkMocha: {"  ✔ adds", "  ✔ is slow (123ms)", "  1) fails", "  2) math", "✔ x (1.5 s)", "10) y (3ms)", "  - pending"},
	FrameworkJest: {"PASS test/a.test.js", "FAIL test/b.test.js (5.2 s)", "  ✓ reads (3 ms)", "  ✕ breaks (1 ms)",
		"PASS src/x.test.ts (10 s)", "✓ no time", "○ skipped later"},
	FrameworkCTestFmt: {"1/3 Test #1: format-test ......................   Passed    0.02 sec",
		"2/3 Test #2: core-test ........................***Failed    0.00 sec", "3/3 Test #3: a b ....***Failed",
		"4/4 Test #4: missing ....***Not Run   0.00 sec", "-- Performing Test HAS_X - Success",
		"-- Performing Test HAS_Y - Failed", "-- Performing Test HAS_Z - skipped", "-- PERFORMING TEST Big - SUCCESS"},
	FrameworkAutomake: {"PASS: tests/jqtest", "FAIL: tests/shtest", "SKIP: tests/utf8test", "  PASS: tests/mantest  ",
		"PASS: a b", "XFAIL: tests/x", "ERROR: tests/y", "# PASS:  3"},
}

// noise are line pieces any log may hold: other line breaks, Unicode
// whitespace and digits, ANSI colour.
var noise = []string{"\r\n", "\r", "\v", "\x1c", "\u2028", "\u00a0", "\u2003", "\x1b[32m", "\x1b[0m", "٣", "\t", " ", "Tests run:", "Running "}

// randomLog builds a log of lines mostly from pool, some from all pools,
// with noise mixed in.
func randomLog(r *rand.Rand, pool []string, all []string) string {
	var b strings.Builder
	for range r.IntN(14) {
		switch k := r.IntN(10); {
		case k < 7:
			b.WriteString(pool[r.IntN(len(pool))])
		case k < 9:
			b.WriteString(all[r.IntN(len(all))])
		default:
			b.WriteString(noise[r.IntN(len(noise))])
		}
		if r.IntN(6) == 0 {
			b.WriteString(noise[r.IntN(len(noise))])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// poolFor is the fragment pool of a framework (ctest's for both ctest
// parsers, jest's for both jest parsers).
func poolFor(fw string) []string {
	switch fw {
	case FrameworkCTestCatch2:
		return fragments[FrameworkCTestFmt]
	case FrameworkJestDarkreader:
		return fragments[FrameworkJest]
	}
	return fragments[fw]
}

// TestParsersMatchHarnessGenerated gives 200 generated logs per repository
// to msb's parser and the harness's parse_log: the parsers of the tools
// this machine cannot run (Maven, Gradle, automake) are checked here, the
// others again on text their real logs do not hold.
func TestParsersMatchHarnessGenerated(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 2026))
	var all []string
	for _, p := range fragments {
		all = append(all, p...)
	}
	var jobs []parseJob
	for _, repo := range sortedRepos() {
		job := parseJob{Repo: repo}
		for i := range 200 {
			job.Logs = append(job.Logs, randomLog(r, poolFor(Repos[repo]), all))
			job.Names = append(job.Names, fmt.Sprintf("generated log %d: %q", i, job.Logs[i]))
		}
		jobs = append(jobs, job)
	}
	n := compareWithHarness(t, jobs)
	t.Logf("%d generated logs compared", n)
}
