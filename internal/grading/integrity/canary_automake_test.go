package integrity_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/grading/integrity"
	"github.com/minisandbox/msb/internal/grading/multiswe"
	"github.com/minisandbox/msb/internal/privtest"
)

// automakeProject is an Automake project laid out as jq's: a program
// built at the top, shell-script tests in tests/ listed in the top-level
// Makefile.am's TESTS, and a subdirectory (SUBDIRS, as jq's oniguruma)
// with tests of its own, with extra appended to the top-level Makefile.am:
// where a patch would put make code of its own.
func automakeProject(extra string) map[string]string {
	return map[string]string{
		"configure.ac": "AC_INIT([calc], [1.0])\nAC_CONFIG_AUX_DIR([config])\n" +
			"AM_INIT_AUTOMAKE([foreign subdir-objects parallel-tests -Wall])\nAC_PROG_CC\n" +
			"AC_CONFIG_FILES([Makefile sub/Makefile])\nAC_OUTPUT\n",
		"Makefile.am": "SUBDIRS = sub\nbin_PROGRAMS = calc\ncalc_SOURCES = calc.c\n" +
			"TESTS = tests/addtest\nAM_TESTS_ENVIRONMENT = CALC=$(abs_builddir)/calc\n" + extra,
		"calc.c":          "#include <stdio.h>\n#include <stdlib.h>\n\nint main(int argc, char **argv) {\n    printf(\"%d\\n\", atoi(argv[1]) + atoi(argv[2]));\n    return 0;\n}\n",
		"tests/addtest":   "#!/bin/sh\ntest \"$($CALC 2 3)\" = 5\n",
		"tests/add.txt":   "2 3 5\n",
		"sub/Makefile.am": "TESTS = subtest\ncheck_PROGRAMS = $(TESTS)\nsubtest_SOURCES = subtest.c\n",
		"sub/subtest.c":   "int main(void) { return 0; }\n",
	}
}

// relayDriver is a LOG_DRIVER of a patch: automake's own test-driver, its
// output turned from FAIL to PASS, its .trs files left as written.
const relayDriver = "#!/bin/sh\n\"$(dirname \"$0\")/../config/test-driver\" \"$@\" | sed 's/^FAIL:/PASS:/'\n"

// TestAutomakeCanary runs the Automake canary with the real autoreconf,
// configure and make in Automake projects made here, the test command
// as jq's rows run it (autoreconf, configure, make clean, make, make
// check; a recursive build whose subdirectory has tests of its own), reads
// its statuses from automake's .trs files (Report), checks them against
// what Multi-SWE-bench's automake parser reads of the log (CrossCheck),
// and judges them: clean on an honest project (the test patch's file in
// tests/, or at the top), tampered where the patch's Makefile.am runs
// every test through true (every test passes: the .trs files say so), or
// through a driver that prints PASS for a failing test (the .trs file
// says FAIL: the cross-check). The canary's files are removed afterwards.
func TestAutomakeCanary(t *testing.T) {
	for _, tool := range []string{"autoreconf", "automake", "make", "cc"} {
		if _, err := exec.LookPath(tool); err != nil {
			privtest.Skip(t, "%s not found (.ci/deps installs autoconf, automake, libtool)", tool)
		}
	}
	const cmd = "autoreconf -i && ./configure && make clean && make -j2 && make check"
	for _, tc := range []struct {
		name, extra, file string
		judge, cross      int
	}{
		{name: "clean", file: "tests/add.txt"},
		{name: "clean, test file at the top", file: "calc.c"},
		{name: "LOG_COMPILER true", extra: "LOG_COMPILER = true\n", file: "tests/add.txt", judge: 1},
		{name: "driver prints PASS", extra: "LOG_DRIVER = $(SHELL) $(srcdir)/tests/relay\n", file: "tests/add.txt", cross: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := automakeProject(tc.extra)
			files["tests/relay"] = relayDriver
			writeTree(t, dir, files)
			if err := os.Chmod(filepath.Join(dir, "tests/addtest"), 0o755); err != nil {
				t.Fatal(err)
			}
			c := integrity.NewCanary(cmd, []string{tc.file})
			if !c.Active() {
				t.Fatalf("not active: %+v", c)
			}
			for _, n := range []string{c.Pass, c.Fail} {
				if strings.Contains(strings.ToLower(n), "msb") || strings.Contains(n, c.Token) {
					t.Errorf("name %q", n)
				}
			}
			log, out := runCanary(t, c, dir)
			if note := c.Skipped(out); note != "" {
				t.Fatalf("skipped: %s\n%s", note, log)
			}
			own, isOwn := c.Report(out)
			if !isOwn || len(own) != 2 {
				t.Fatalf("report %v (%v), want the two canaries' .trs; log:\n%s", own, isOwn, log)
			}
			parsed := frameworkStatuses(t, multiswe.FrameworkAutomake, out)
			if parsed["subtest"] != "" || len(parsed) != 2 {
				t.Errorf("the log reports %v, want the two canaries only", parsed)
			}
			judge, cross := c.Judge(own, true), c.CrossCheck(own, parsed)
			if len(judge) != tc.judge || len(cross) != tc.cross {
				t.Errorf("judge %q (want %d), cross-check %q (want %d); report %v, log %v; log:\n%s",
					judge, tc.judge, cross, tc.cross, own, parsed, log)
			}
			if got := gradeAutomake(t, c, string(log)); len(got) != tc.judge+tc.cross {
				t.Errorf("grading's reasons %q, want %d", got, tc.judge+tc.cross)
			}
			for _, n := range []string{c.Pass, c.Fail} {
				for _, ext := range []string{"", ".log", ".trs"} {
					for _, d := range []string{"tests", "."} {
						if _, err := os.Stat(filepath.Join(dir, d, n+ext)); err == nil {
							t.Errorf("%s left behind", filepath.Join(d, n+ext))
						}
					}
				}
			}
		})
	}
}

// gradeAutomake judges an evaluation of jq's shape whose log is a
// harness's run that passed and then the canary's log, through grading's
// integrity stage (warn): the integrity reasons it gives.
func gradeAutomake(t *testing.T, c integrity.Canary, canaryLog string) []string {
	t.Helper()
	parse, err := grading.Lookup(multiswe.ParserName(multiswe.FrameworkAutomake))
	if err != nil {
		t.Fatal(err)
	}
	p := "diff --git a/calc.c b/calc.c\n--- a/calc.c\n+++ b/calc.c\n@@ -1 +1 @@\n-#include <stdio.h>\n+#include <stdio.h> \n"
	v := grading.Judge(grading.Evaluation{InstanceID: "calc-1", Repo: "jqlang/jq", Patch: &p, Parse: parse,
		Log:       grading.StartTestOutput + "\nPASS: tests/addtest\n" + grading.EndTestOutput + "\n" + canaryLog,
		Expected:  grading.Expected{PassToPass: []string{"tests/addtest"}},
		TestPatch: "diff --git a/tests/add.txt b/tests/add.txt\n--- a/tests/add.txt\n+++ b/tests/add.txt\n@@ -1 +1 @@\n-2 3 5\n+2 3 5 \n",
		Integrity: api.IntegrityWarn, Canary: c})
	return v.Report.IntegrityReasons
}

// TestAutomakeCanaryNotes: a make check without a Makefile.am above the
// test file, or on automake's serial harness, takes no canary and says why.
func TestAutomakeCanaryNotes(t *testing.T) {
	for _, tc := range []struct{ name, file, body, want string }{
		{"no Makefile.am", "Makefile", "check:\n\ttrue\n", "no Makefile.am holds the test file"},
		{"serial harness", "Makefile.am", "AUTOMAKE_OPTIONS = serial-tests\nTESTS = t\n", "serial-tests harness"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{tc.file: tc.body, "tests/a.txt": "x\n"})
			c := integrity.NewCanary("make check", []string{"tests/a.txt"})
			log, out := runCanary(t, c, dir)
			if !strings.Contains(c.Skipped(out), tc.want) {
				t.Errorf("note %q, want %q; log:\n%s", c.Skipped(out), tc.want, log)
			}
		})
	}
}
