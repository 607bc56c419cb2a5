package integrity

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"strings"
)

// The Gradle canary is the Maven canary (canary_java.go) run by Gradle:
// the same two JUnit classes, written beside the first Java test file of
// the test patch, in its package, on its JUnit flavour, and run by the
// instance's own Gradle command (its last line: gradle, or the project's
// wrapper, with the command's options and tasks) with its --tests
// selection replaced by the two classes, given to its test task,
// --continue, and an init script, written to a temporary file, that keeps
// a test task matching neither class (another project's) from failing
// the run (failOnNoMatchingTests false), so that the run's exit status is
// the canary's project's.
//
// What Gradle prints of a test depends on the build (testLogging), which a
// patch can change and the harness's parsers read, so the canary's
// statuses are not read from the log: they are Gradle's own report, the
// JUnit XML file it writes for each test class
// (build/test-results/<task>/TEST-<package>.<class>.xml), found under the
// repository by the class's name and printed after the run, base64 on one
// line behind the canary's token (Report), with the run's exit status. A
// test the report says failed in a run that exited 0 is a failure the
// build ignores (a Test task's ignoreFailures): its status is Ignored.

const canaryGradle = "gradle"

// Ignored is the status of a failing test whose build still succeeds.
const Ignored = "IGNORED"

var (
	// gradleCmd matches Gradle's launchers: gradle and the wrapper.
	gradleCmd = lazyRegexp(`(^|[\s;&|(/])(gradle|gradlew)(\s|$)`)
	// gradleSelect is a --tests option and its pattern.
	gradleSelect = lazyRegexp(`\s--tests(=|\s+)('[^']*'|"[^"]*"|\S+)`)
)

// gradleCanary draws the Gradle canary for testCmd.
func gradleCanary(testCmd string, testFiles []string) Canary {
	c, last := drawJava(testCmd, testFiles, canaryGradle, "Gradle", gradleCmd().MatchString)
	if c.Active() {
		c.Command = gradleCommand(last, c.Pass, c.Fail)
	}
	return c
}

// gradleCommand is the Gradle command line last with its --tests options
// replaced by the classes pass and fail (in the package $pkg the script
// finds), given after its last test task (test, or a path ending in
// :test; a test task added when it names none), --continue and the init
// script $i (gradlePlace).
func gradleCommand(last, pass, fail string) string {
	line := strings.TrimRight(gradleSelect().ReplaceAllString(last, ""), " \t")
	sel := fmt.Sprintf(` --tests "${pkg:+$pkg.}%s" --tests "${pkg:+$pkg.}%s"`, pass, fail)
	end := -1
	for i := 0; i < len(line); {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' {
			j++
		}
		if w := line[i:j]; w == "test" || strings.HasSuffix(w, ":test") {
			end = j
		}
		i = j
	}
	if end < 0 {
		return line + " test" + sel + gradleTail
	}
	return line[:end] + sel + line[end:] + gradleTail
}

// gradleTail ends the Gradle canary's command line.
const gradleTail = ` --continue --init-script "$i"`

// gradleInit is the Gradle canary's init script: no test task fails for
// matching neither class.
const gradleInit = "allprojects { tasks.withType(Test) { filter.failOnNoMatchingTests = false } }"

// gradlePlace is the part of the Gradle canary's script before its run:
// the repository's directory ($r, where the reports are looked for), a
// note and no run when no Gradle build holds the test file $f, the two
// classes (javaPlace) and the init script ($i).
func (c Canary) gradlePlace() string {
	var b strings.Builder
	b.WriteString("r=$(pwd)\nd=$(dirname \"$f\")\n")
	b.WriteString("until [ -f \"$d/build.gradle\" ] || [ -f \"$d/build.gradle.kts\" ] || [ -f \"$d/settings.gradle\" ] || " +
		"[ -f \"$d/settings.gradle.kts\" ] || [ \"$d\" = . ] || [ \"$d\" = / ]; do d=$(dirname \"$d\"); done\n")
	b.WriteString("if [ ! -f \"$d/build.gradle\" ] && [ ! -f \"$d/build.gradle.kts\" ] && [ ! -f \"$d/settings.gradle\" ] && " +
		"[ ! -f \"$d/settings.gradle.kts\" ]; then\n")
	fmt.Fprintf(&b, "  echo '%sno Gradle build (build.gradle, settings.gradle) holds the test file'; exit 0\nfi\n", c.skipLine())
	b.WriteString(c.javaPlace())
	fmt.Fprintf(&b, "i=$(mktemp) || exit 0\necho %s > \"$i\"\n", quote(gradleInit))
	return b.String()
}

// reportLine starts the lines of the Gradle canary's report: its run's
// exit status ("exit <n>") and each report file ("file <base64>").
func (c Canary) reportLine() string { return "msb canary report " + c.Token + " " }

// gradleReport is the part of the Gradle canary's script right after its
// run: the run's exit status and the report files of the two classes.
func (c Canary) gradleReport() string {
	var b strings.Builder
	b.WriteString("rc=$?\n")
	fmt.Fprintf(&b, "find \"$r\" -name .git -prune -o -type f \\( -name \"TEST-${pkg:+$pkg.}%s.xml\" -o -name \"TEST-${pkg:+$pkg.}%s.xml\" \\) -print |\n",
		c.Pass, c.Fail)
	fmt.Fprintf(&b, "  while IFS= read -r x; do echo \"%sfile $(base64 < \"$x\" | tr -d '\\n')\"; done\n", c.reportLine())
	fmt.Fprintf(&b, "echo \"%sexit $rc\"\n", c.reportLine())
	return b.String()
}

// Report returns the statuses of the canary run's own report (out is its
// output: Output), test id ("<class>.<method>") to PASSED, FAILED,
// ERROR, SKIPPED or Ignored, and true, for a canary whose runner's output
// is not what decides (Gradle's; Automake's .trs files, by test name:
// automakeStatuses); nil and false for the others, whose
// output the instance's parser reads. A report file that does not parse
// adds no status.
func (c Canary) Report(out string) (map[string]string, bool) {
	if !c.Active() {
		return nil, false
	}
	if c.lang == canaryAutomake {
		return c.automakeStatuses(out), true
	}
	if c.lang != canaryGradle {
		return nil, false
	}
	statuses := map[string]string{}
	exit := ""
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, c.reportLine())
		if !ok {
			continue
		}
		if v, ok := strings.CutPrefix(rest, "exit "); ok {
			exit = strings.TrimSpace(v)
		} else if v, ok := strings.CutPrefix(rest, "file "); ok {
			junitStatuses(strings.TrimSpace(v), statuses)
		}
	}
	if exit == "0" {
		for id, st := range statuses {
			if st == "FAILED" || st == "ERROR" {
				statuses[id] = Ignored
			}
		}
	}
	return statuses, true
}

// junitReport is the part of a JUnit XML report file that says what ran.
type junitReport struct {
	Cases []struct {
		Name    string    `xml:"name,attr"`
		Class   string    `xml:"classname,attr"`
		Failure *struct{} `xml:"failure"`
		Error   *struct{} `xml:"error"`
		Skipped *struct{} `xml:"skipped"`
	} `xml:"testcase"`
}

// junitStatuses adds the test cases of the base64 JUnit XML report enc to
// statuses.
func junitStatuses(enc string, statuses map[string]string) {
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return
	}
	var r junitReport
	if xml.Unmarshal(raw, &r) != nil {
		return
	}
	for _, tc := range r.Cases {
		st := "PASSED"
		switch {
		case tc.Failure != nil:
			st = "FAILED"
		case tc.Error != nil:
			st = "ERROR"
		case tc.Skipped != nil:
			st = "SKIPPED"
		}
		statuses[tc.Class+"."+tc.Name] = st
	}
}
