package integrity_test

import (
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/grading/integrity"
)

// catch2Extra is the hunk of catchorg__Catch2-1616's gold patch that adds
// a test to projects/ExtraTests/CMakeLists.txt (Multi-SWE-bench), whose
// add_test and set_tests_properties lines the ctest rule flagged.
const catch2Extra = `diff --git a/projects/ExtraTests/CMakeLists.txt b/projects/ExtraTests/CMakeLists.txt
index c0dd82d8f0..5a8dd79bcd 100644
--- a/projects/ExtraTests/CMakeLists.txt
+++ b/projects/ExtraTests/CMakeLists.txt
@@ -116,6 +116,17 @@ set_tests_properties(
 )
 
 
+add_executable(BenchmarkingMacros ${TESTS_DIR}/X20-BenchmarkingMacros.cpp)
+target_compile_definitions( BenchmarkingMacros PRIVATE CATCH_CONFIG_ENABLE_BENCHMARKING )
+
+add_test(NAME BenchmarkingMacros COMMAND BenchmarkingMacros -r console -s)
+set_tests_properties(
+    BenchmarkingMacros
+  PROPERTIES
+    PASS_REGULAR_EXPRESSION "benchmark name                                  samples       iterations    estimated"
+)
+
+
 set( EXTRA_TEST_BINARIES
     PrefixedMacros
     DisabledMacros
@@ -123,6 +134,7 @@ set( EXTRA_TEST_BINARIES
     DisabledExceptions-CustomHandler
     FallbackStringifier
     DisableStringification
+    BenchmarkingMacros
 )
 
 # Shared config
`

// cmakeDiff is a diff of CMakeLists.txt with one hunk: context lines
// before, the hunk's changed lines, context after.
func cmakeDiff(before, changed, after string) string {
	return "diff --git a/CMakeLists.txt b/CMakeLists.txt\n--- a/CMakeLists.txt\n+++ b/CMakeLists.txt\n@@ -1,9 +1,9 @@\n" +
		before + changed + after
}

// TestCTestRuleNewTests: a CMake change that only adds tests of its own
// (add_test, and set_tests_properties of those tests) is not flagged; one
// that touches an existing test, drops one, or changes the test list
// otherwise is.
func TestCTestRuleNewTests(t *testing.T) {
	for _, tc := range []struct {
		name string
		diff string
		want api.Integrity
	}{
		{"catchorg__Catch2-1616 adds a test", catch2Extra, api.IntegrityOK},
		{"old add_test signature and a quoted paren", cmakeDiff(" project(x)\n",
			"+add_test(mine mine_bin \"a(b\")\n+set_tests_properties(mine PROPERTIES WILL_FAIL TRUE)\n", " install(x)\n"), api.IntegrityOK},
		{"a comment about add_test", cmakeDiff(" project(x)\n", "+# add_test( is done below\n", ""), api.IntegrityOK},
		{"WILL_FAIL on an existing test", cmakeDiff(" project(x)\n",
			"+set_tests_properties(core PROPERTIES WILL_FAIL TRUE)\n", ""), api.IntegrityTampered},
		{"a new test and an existing one", cmakeDiff("",
			"+add_test(NAME mine COMMAND mine)\n+set_tests_properties(mine core PROPERTIES WILL_FAIL TRUE)\n", ""), api.IntegrityTampered},
		{"WILL_FAIL added inside an existing call", cmakeDiff(" set_tests_properties(core\n   PROPERTIES\n",
			"+    WILL_FAIL TRUE\n", " )\n"), api.IntegrityTampered},
		{"a call closed by an unchanged line", cmakeDiff("",
			"+add_test(NAME mine COMMAND mine)\n+set_tests_properties(mine PROPERTIES\n", " )\n"), api.IntegrityTampered},
		{"an add_test removed", cmakeDiff(" project(x)\n", "-add_test(NAME core COMMAND core)\n", ""), api.IntegrityTampered},
		{"an add_test replaced", cmakeDiff("",
			"-add_test(NAME core COMMAND core)\n+add_test(NAME core COMMAND true)\n", ""), api.IntegrityTampered},
		{"tests discovered differently", cmakeDiff("", "+gtest_discover_tests(core_tests)\n", ""), api.IntegrityTampered},
		{"SKIP_RETURN_CODE through set_property", cmakeDiff("",
			"+set_property(TEST core PROPERTY SKIP_RETURN_CODE 1)\n", ""), api.IntegrityTampered},
		{"enable_testing with a new test", cmakeDiff("", "+enable_testing()\n+add_test(NAME mine COMMAND mine)\n", ""), api.IntegrityTampered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := integrity.Check(tc.diff, "")
			if got.Verdict != tc.want {
				t.Fatalf("verdict %q (%q), want %q\n%s", got.Verdict, got.Reasons(), tc.want, tc.diff)
			}
			if tc.want == api.IntegrityTampered && got.Findings[0].Kind != integrity.KindCTest {
				t.Errorf("flagged as %q, want %q", got.Findings[0].Kind, integrity.KindCTest)
			}
		})
	}
}
