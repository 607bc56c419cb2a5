package integrity_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/grading/integrity"
)

// jqTests is the hunk of jq's Makefile.am around its test list, as
// jqlang__jq-3161's gold patch changes it (Multi-SWE-bench): a test
// appended to TESTS.
func jqTests(changed string) string {
	return "diff --git a/Makefile.am b/Makefile.am\n--- a/Makefile.am\n+++ b/Makefile.am\n@@ -141,12 +141,12 @@ endif\n" +
		" \n ### Tests (make check)\n \n" + changed
}

// jqTestsAfter is the rest of jqTests' hunk.
const jqTestsAfter = " if !WIN32\n TESTS += tests/optionaltest\n endif\n \n AM_TESTS_ENVIRONMENT = JQ=$(abs_builddir)/jq\n"

const jqTestsLine = " TESTS = tests/mantest tests/jqtest tests/shtest tests/utf8test tests/base64test\n"

// TestAutomakeRule: a Makefile.am change that only adds tests (3161's) is
// not flagged; one that drops a test, resets the list, or changes how
// make check runs the tests is, on the shape of jq's real Makefile.am.
func TestAutomakeRule(t *testing.T) {
	for _, tc := range []struct {
		name, diff string
		want       api.Integrity
	}{
		{"jqlang__jq-3161 appends a test", jqTests("-TESTS = tests/mantest tests/jqtest tests/shtest tests/utf8test tests/base64test\n" +
			"+TESTS = tests/mantest tests/jqtest tests/shtest tests/utf8test tests/base64test tests/uritest\n" + jqTestsAfter), api.IntegrityOK},
		{"a test added on a continuation line", jqTests("-TESTS = tests/mantest tests/jqtest tests/shtest tests/utf8test tests/base64test\n" +
			"+TESTS = tests/mantest tests/jqtest tests/shtest \\\n+\ttests/utf8test tests/base64test tests/mine\n" + jqTestsAfter), api.IntegrityOK},
		{"an EXTRA_DIST line removed mid-list (the header names it)", "diff --git a/Makefile.am b/Makefile.am\n--- a/Makefile.am\n+++ b/Makefile.am\n" +
			"@@ -218,7 +218,6 @@ EXTRA_DIST = $(DOC_FILES) $(man_MANS) $(TESTS) $(TEST_LOG_COMPILER)     \\\n" +
			"         jq.1.prebuilt jq.spec src/lexer.c src/lexer.h src/parser.c      \\\n" +
			"-        tests/base64.test tests/jq-f-test.sh tests/jq.test              \\\n" +
			"         tests/modules/a.jq tests/modules/b/b.jq tests/modules/c/c.jq    \\\n", api.IntegrityOK},
		{"an unrelated variable", jqTests(jqTestsLine + "+jq_LDADD += -lm\n" + jqTestsAfter), api.IntegrityOK},
		{"a test dropped", jqTests("-TESTS = tests/mantest tests/jqtest tests/shtest tests/utf8test tests/base64test\n" +
			"+TESTS = tests/mantest tests/jqtest tests/utf8test tests/base64test\n" + jqTestsAfter), api.IntegrityTampered},
		{"a test dropped from a continuation line", jqTests("-TESTS = tests/mantest tests/jqtest \\\n-\ttests/shtest\n+TESTS = tests/mantest tests/jqtest \\\n+\ttests/utf8test\n"), api.IntegrityTampered},
		{"the list reset by a later assignment", jqTests(jqTestsLine + " if !WIN32\n-TESTS += tests/optionaltest\n+TESTS = tests/optionaltest\n endif\n"), api.IntegrityTampered},
		{"a new plain assignment", jqTests(jqTestsLine + "+TESTS = tests/utf8test\n" + jqTestsAfter), api.IntegrityTampered},
		{"a make function filters the list", jqTests(jqTestsLine + "+TESTS += $(filter-out tests/shtest, $(TESTS))\n" + jqTestsAfter), api.IntegrityTampered},
		{"LOG_COMPILER true", jqTests(jqTestsLine + "+LOG_COMPILER = true\n" + jqTestsAfter), api.IntegrityTampered},
		{"a suffix's LOG_COMPILER", jqTests(jqTestsLine + "+SH_LOG_COMPILER = /bin/true\n" + jqTestsAfter), api.IntegrityTampered},
		{"the tests' environment", jqTests(jqTestsLine + jqTestsAfter + "+AM_TESTS_ENVIRONMENT += exit 0;\n"), api.IntegrityTampered},
		{"expected failures", jqTests(jqTestsLine + "+XFAIL_TESTS = tests/shtest\n" + jqTestsAfter), api.IntegrityTampered},
		{"a check-local rule", jqTests(jqTestsLine + jqTestsAfter + "+\n+check-local:\n+\t@true\n"), api.IntegrityTampered},
		{"a rule that rewrites a test script", jqTests(jqTestsLine + jqTestsAfter + "+\n+tests/shtest: .FORCE\n+\tprintf 'exit 0' > $@\n"), api.IntegrityTampered},
		{"a recipe line of a test rule (the header names it)", "diff --git a/Makefile.am b/Makefile.am\n--- a/Makefile.am\n+++ b/Makefile.am\n" +
			"@@ -166,3 +166,3 @@ tests/man.test tests/manonig.test: $(srcdir)/docs/content/manual/dev/manual.yml\n" +
			" if ENABLE_DOCS\n-\t$(AM_V_GEN) ( cd ${abs_srcdir}/docs && \\\n+\ttrue && \\\n", api.IntegrityTampered},
		{"a Makefile fragment included", jqTests(jqTestsLine + jqTestsAfter + "+include build/check.mk\n"), api.IntegrityTampered},
		{"configure.ac substitutes LOG_COMPILER", "diff --git a/configure.ac b/configure.ac\n--- a/configure.ac\n+++ b/configure.ac\n@@ -10,2 +10,4 @@\n AC_PROG_CC\n+LOG_COMPILER=true\n+AC_SUBST([LOG_COMPILER])\n AC_OUTPUT\n", api.IntegrityTampered},
		{"configure.ac's other lines", "diff --git a/configure.ac b/configure.ac\n--- a/configure.ac\n+++ b/configure.ac\n@@ -10,2 +10,3 @@\n AC_PROG_CC\n+AC_CHECK_FUNCS([strptime timegm])\n AC_OUTPUT\n", api.IntegrityOK},
		{"the test list put under a false condition", jqTests("+if FALSE\n" + jqTestsLine + "+endif\n" + jqTestsAfter), api.IntegrityTampered},
		{"a continuation line removed where nothing names its variable", "diff --git a/Makefile.am b/Makefile.am\n--- a/Makefile.am\n+++ b/Makefile.am\n" +
			"@@ -143,3 +143,2 @@\n \ttests/jqtest \\\n-\ttests/shtest \\\n \ttests/utf8test\n", api.IntegrityTampered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := integrity.Check(tc.diff, "")
			if got.Verdict != tc.want {
				t.Fatalf("got %s %q, want %s", got.Verdict, got.Reasons(), tc.want)
			}
			if tc.want == api.IntegrityTampered && got.Findings[0].Kind != integrity.KindAutomake {
				t.Errorf("flagged as %q, want %q", got.Findings[0].Kind, integrity.KindAutomake)
			}
		})
	}
}

// TestAutomakeRuleRealGold: jqlang__jq-3161's real gold patch, which
// appends tests/uritest to TESTS and removes a line of EXTRA_DIST, is not
// flagged, and the same patch with tests/shtest dropped from TESTS is.
func TestAutomakeRuleRealGold(t *testing.T) {
	var row multiSWERow
	for _, r := range multiSWERows(t, filepath.Join(multiSWEDir, "c__jqlang__jq.jsonl")) {
		if r.ID == "jqlang__jq-3161" {
			row = r
		}
	}
	if row.ID == "" {
		t.Skipf("jqlang__jq-3161 is not in %s", multiSWEDir)
	}
	if !strings.Contains(row.Fix, "+TESTS = tests/mantest tests/jqtest tests/shtest tests/utf8test tests/base64test tests/uritest\n") {
		t.Fatal("jqlang__jq-3161's gold patch no longer appends tests/uritest to TESTS: update this test")
	}
	if got := integrity.Check(row.Fix, row.Test); got.Verdict != api.IntegrityOK {
		t.Fatalf("gold patch flagged: %q", got.Reasons())
	}
	dropped := strings.Replace(row.Fix, "tests/jqtest tests/shtest tests/utf8test tests/base64test tests/uritest\n", "tests/jqtest tests/utf8test tests/base64test tests/uritest\n", 1)
	got := integrity.Check(dropped, row.Test)
	if got.Verdict != api.IntegrityTampered || got.Findings[0].Kind != integrity.KindAutomake {
		t.Fatalf("gold patch with tests/shtest dropped: %s %q, want %s", got.Verdict, got.Reasons(), integrity.KindAutomake)
	}
}
