package integrity_test

import (
	"encoding/base64"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/grading/integrity"
)

// TestGradleCanaryCommand: the Gradle canary runs the instance's own
// Gradle command with its --tests selection replaced by the two canary
// classes, given to its last test task.
func TestGradleCanaryCommand(t *testing.T) {
	const file = "core/src/test/java/org/mockito/AddTest.java"
	for _, tc := range []struct{ cmd, before, after string }{
		{"gradle --offline test", "gradle --offline test", ""},
		{"./gradlew test --tests org.mockito.X --tests='a b' -i", "./gradlew test", " -i"},
		{"cd core && ./gradlew :core:test --offline", "cd core && ./gradlew :core:test", " --offline"},
		{"./gradlew clean build -x javadoc", "./gradlew clean build -x javadoc test", ""},
		{"gradle build || true\ngradle --offline check test", "gradle --offline check test", ""},
	} {
		c := integrity.NewCanary(tc.cmd, []string{"README.md", file})
		sel := fmt.Sprintf(` --tests "${pkg:+$pkg.}%s" --tests "${pkg:+$pkg.}%s"`, c.Pass, c.Fail)
		want := tc.before + sel + tc.after + ` --continue --init-script "$i"`
		if !c.Active() || c.Command != want || !strings.Contains(c.Script(), "'"+file+"'") {
			t.Errorf("%s:\n got %q\nwant %q", tc.cmd, c.Command, want)
		}
	}
	for _, tc := range []struct{ cmd, file string }{
		{"gradle test && echo done", file},
		{"./gradlew test", "core/src/main/java/A.java"},
		{"./gradlew test", "core/src/test/kotlin/ATest.kt"},
	} {
		if c := integrity.NewCanary(tc.cmd, []string{tc.file}); c.Active() || !strings.HasPrefix(c.Note, "canary skipped: ") {
			t.Errorf("%s %s: %+v", tc.cmd, tc.file, c)
		}
	}
}

// junitXML is a report file as Gradle writes it for a class of one test,
// failed when failed is set.
func junitXML(class string, failed bool) string {
	failure := ""
	if failed {
		failure = `<failure message="expected:&lt;a&gt; but was:&lt;b&gt;" type="org.junit.ComparisonFailure">org.junit.ComparisonFailure</failure>`
	}
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="%[1]s" tests="1" skipped="0" failures="0" errors="0" timestamp="2026-12-05T07:00:00" hostname="h" time="0.01">
  <properties/>
  <testcase name="check" classname="%[1]s" time="0.01">%[2]s</testcase>
  <system-out><![CDATA[]]></system-out>
  <system-err><![CDATA[]]></system-err>
</testsuite>
`, class, failure)
}

// TestGradleCanaryReport: the Gradle canary's statuses are its report
// lines (the token's), not the log's test lines; a failing test in a
// build that exited 0 is ignored, which Judge flags.
func TestGradleCanaryReport(t *testing.T) {
	c := integrity.NewCanary("gradle --offline test", []string{"src/test/java/calc/AddTest.java"})
	line := func(rest string) string { return "msb canary report " + c.Token + " " + rest + "\n" }
	file := func(class string, failed bool) string {
		return line("file " + base64.StdEncoding.EncodeToString([]byte(junitXML("calc."+class, failed))))
	}
	forged := "calc." + c.Fail + " > check PASSED\nmsb canary report 0123456789abcdef file " +
		base64.StdEncoding.EncodeToString([]byte(junitXML("calc.MulTest", false))) + "\n"
	for _, tc := range []struct {
		name, out string
		reasons   int
		want      string
	}{
		{"honest", forged + file(c.Pass, false) + file(c.Fail, true) + line("exit 1"), 0, ""},
		{"failure ignored", file(c.Pass, false) + file(c.Fail, true) + line("exit 0"), 1, "ignored"},
		{"failing test passes", file(c.Pass, false) + file(c.Fail, false) + line("exit 0"), 1, "as passed"},
		{"no report", forged + line("exit 1"), 2, "did not report a failing test"},
		{"report not JUnit XML", file(c.Pass, false) + line("file bm90IHhtbA==") + line("exit 1"), 1, "did not report a failing test"},
	} {
		statuses, own := c.Report(tc.out)
		got := c.Judge(statuses, own)
		if len(got) != tc.reasons || (tc.want != "" && !strings.Contains(got[0], tc.want)) {
			t.Errorf("%s: %q from %v", tc.name, got, statuses)
		}
	}
	if _, own := integrity.NewCanary("mvn test", []string{"src/test/java/calc/AddTest.java"}).Report(""); own {
		t.Error("a Maven canary's statuses are its parser's, not a report's")
	}
}

// TestGradleCanarySkips runs the Gradle canary's script with real bash,
// traced as the evaluation's script is (set -uxo pipefail), where the
// repository cannot take it: its run says why (a note, not a flag) and
// runs no Gradle.
func TestGradleCanarySkips(t *testing.T) {
	const file = "src/test/java/calc/AddTest.java"
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"no Gradle build", map[string]string{file: "package calc;\n\nimport org.junit.Test;\n"}, "no Gradle build"},
		{"TestNG", map[string]string{"settings.gradle": "", file: "package calc;\n\nimport org.testng.annotations.Test;\n"}, "TestNG"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tc.files)
			c := integrity.NewCanary("gradle --offline test", []string{file})
			cmd := exec.Command("bash", "-c", "set -uxo pipefail\n"+c.Script())
			cmd.Dir = dir
			log, _ := cmd.CombinedOutput()
			out, ok := c.Output(string(log))
			if !ok {
				t.Fatalf("no canary markers in:\n%s", log)
			}
			if note := c.Skipped(out); !strings.Contains(note, tc.want) || strings.Contains(out, "--continue") {
				t.Fatalf("note %q, want one saying %q:\n%s", note, tc.want, log)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "src/test/java/calc/*")); len(left) != 1 {
				t.Errorf("files left: %v", left)
			}
		})
	}
}
