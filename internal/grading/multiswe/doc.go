// Package multiswe grades Multi-SWE-bench instances the way the
// benchmark's harness (the multi-swe-bench package, 1.1.2) does.
//
// The nouns:
//
//   - Run: one execution of a repository's test command. The harness makes
//     three per instance: on the base commit (run), with the test patch
//     (test), with the test and fix patches (fix).
//   - Status: what one test did in one run: PASS, FAIL, SKIP, or NONE when
//     the run's log does not name it.
//   - Result: one run's test names by status, read from its log by a
//     ParseFunc or recorded in a dataset row (ResultOf). The harness refuses
//     a result that gives one test two statuses (ErrConflict).
//   - Framework: a test tool's output format with its parser, one file each
//     (cargo.go, gotest.go, surefire.go, gradle.go, mocha.go, jest.go,
//     ctest.go, automake.go). Repos maps each repository to the framework
//     its harness instance's parse_log reads; where two repositories read
//     one tool differently (jest in dayjs and darkreader, ctest in fmt and
//     Catch2, Surefire in jackson-core and gson) each has its own parser.
//     The parsers reproduce the harness's, quirks included (gson's skips
//     the log's first 8 characters, go-zero's files a subtest under its
//     parent), because the rows' test names were made by them.
//   - Transition: one test's statuses in the three runs.
//   - Report: the harness's report.py on three runs. It is valid when the
//     fix run names some test, no test goes from PASS (test) to FAIL
//     (fix), some test goes from anything but PASS to PASS, and no test
//     PASSes on the base, is NONE or SKIP with the test patch and FAILs
//     with the fix. A valid report sorts the tests that PASS with the fix
//     by their status with the test patch: p2p, f2p, s2p, n2p.
//   - Verdict (Evaluate): a fix run resolves an instance when the report
//     of the row's recorded run and test runs with this fix run is valid
//     and holds every test of the row's p2p, f2p, s2p and n2p sets in its
//     set of the same name (gen_report.py's evaluation mode). There is no
//     partial resolution.
//   - Grader: the grading.Grader of one instance; grading.For picks it for
//     a dataset.MultiSWEBench row (the package registers itself). It reads
//     logs with the framework the instance's spec names as its log_parser,
//     "multiswe/<framework>" (every framework is registered with grading
//     under that name, so a spec may name it), else with its repository's.
//
// Parity: TestReportMatchesHarness compares Report and Evaluate with the
// harness's own report code on every shared row (222 rows, 4 variants
// each); TestParsersMatchHarness compares every parser with the harness's
// parse_log on real logs made here (testdata/<framework>/), and
// TestParsersMatchHarnessGenerated on generated ones.
package multiswe
