// Package grading turns a test log into a verdict, the way the SWE-bench
// harness does.
//
// The nouns:
//
//   - Status: what one test did in one run (PASSED, FAILED, SKIPPED, ERROR,
//     XFAIL). A StatusMap maps a test name, spelled as the framework prints
//     it, to its Status.
//   - Parser: reads the log of one test framework and returns a StatusMap.
//     There is one file per framework (pytest.go, django.go, sympy.go,
//     seaborn.go, matplotlib.go, unittest.go). The parsers named after the
//     SWE-bench harness's parsers reproduce that harness's behaviour,
//     quirks included (a test name is cut at the first space, a SymPy skip
//     is not recorded), because FAIL_TO_PASS and PASS_TO_PASS lists of the
//     published datasets were produced by those parsers and must be matched
//     name for name. pytest_verbose is SWE-smith's parser, the default for
//     repositories the harness has no spec for (SWE-smith's, SWE-Gym's).
//     TestParsersMatchHarness gives thousands of logs to them and to
//     swebench 4.1.0's and swesmith 0.0.9's own: the maps must be equal.
//     unittest is msb's own.
//     SWE-bench Multilingual's parsers (C/C++, Go, Java, JavaScript, PHP,
//     Ruby, Rust; multilingual_<language>.go) are ported the same way and
//     checked against swebench 5.0.2's by TestMultilingualParsersMatchHarness.
//   - Expected: the FAIL_TO_PASS and PASS_TO_PASS lists of an instance.
//   - TestsStatus (api.TestsStatus): for each list, which tests succeeded and which failed
//     (the harness's tests_status JSON object).
//   - Resolution (api.Resolution): RESOLVED_FULL, RESOLVED_PARTIAL or RESOLVED_NO. An
//     instance is resolved when its resolution is FULL.
//   - Outcome (api.Outcome): what happened to one evaluation, infrastructure included:
//     resolved, unresolved, patch_apply_failed, empty_patch, test_timeout,
//     env_build_failed, infra_error. An infrastructure failure is never
//     reported as "unresolved".
//   - Verdict: Judge's answer for one Evaluation (what happened in the
//     sandbox): the outcome and the harness's per-instance report. Summarize
//     makes the harness's run summary. The data types (api.TestsStatus,
//     api.InstanceReport, api.RunSummary, api.Outcome) live in package api,
//     because they are what msb writes and serves.
//
// Grading rules (SWE-bench harness 5.x, grading.py; TestGradeMatchesHarness
// puts 2000 random cases to this package and to swebench 5.0.2's own
// code): a FAIL_TO_PASS test succeeds when its status is PASSED or XFAIL and fails when it is FAILED,
// ERROR, SKIPPED or missing from the log. A PASS_TO_PASS test succeeds
// ("is maintained") when PASSED, XFAIL or SKIPPED and fails when FAILED,
// ERROR or missing. A status the harness does not know puts the test in
// neither list. An empty list scores 1. The harness's prefix match of ids
// cut inside "[...]" is not needed here: our parsers cut a name at its first
// space, as the parsers that made the datasets' lists did, so such an id is
// the status map's key itself. FULL: every FAIL_TO_PASS and every
// PASS_TO_PASS test succeeds; PARTIAL: some but not all FAIL_TO_PASS tests
// succeed and every PASS_TO_PASS test does; NO otherwise.
//
// Repositories whose logs list only failures are graded FAIL_ONLY: a test
// fails only when it is reported FAILED, and succeeds otherwise (missing
// included). In the harness these are JavaScript repositories
// (FailOnlyRepos); every Python repository is graded PASS_AND_FAIL. As in
// swebench 5.x, a FAIL_ONLY log with no parsed result counts only when a
// runner's summary says tests ran (SuiteRan); otherwise the suite never
// started and the evaluation is unresolved, not a pass of every test
// (TestSuiteRanMatchesHarness asks 5.0.2's own pattern). A PASS_AND_FAIL
// log with no result stays graded as swebench 4.1.0 grades it: every
// listed test missing, so unresolved too.
//
// SWE-smith instances are graded by the same rules: their FAIL_TO_PASS
// tests are those the bug (the dataset's gold "patch") breaks, so a fix
// must make them pass again without breaking PASS_TO_PASS.
package grading
