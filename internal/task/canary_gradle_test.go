package task

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// gradleProject is javaProject built by Gradle (the host's, Debian's
// 4.4.1 here) on JUnit 4, fetched from Maven Central by the dependency
// step and read offline by the evaluation, its tests printed one line
// each ("calc.AddTest > add PASSED", testLogging) for mockito's parser.
// A second project (extra), with a test of its own, makes it a
// multi-project build as mockito's is: its test task matches neither
// canary class.
var gradleProject = langProject{
	name: "gradlecalc",
	base: map[string]string{
		".gitignore":      "build/\n.gradle/\n",
		"settings.gradle": "rootProject.name = 'calc'\ninclude 'extra'\n",
		"build.gradle": `allprojects {
    apply plugin: 'java'

    repositories {
        mavenCentral()
    }

    dependencies {
        testImplementation 'junit:junit:4.13.2'
    }

    test {
        testLogging {
            events 'passed', 'failed', 'skipped'
        }
    }
}
`,
		"extra/src/test/java/extra/ExtraTest.java": strings.ReplaceAll(javaTest("ExtraTest", "extra", "4, 2 + 2"), "package calc;", "package extra;"),
		"src/main/java/calc/Calc.java":             javaCalc("a - b"),
		"src/test/java/calc/MulTest.java":          javaTest("MulTest", "mul", "6, Calc.mul(2, 3)"),
	},
	tests: map[string]string{"src/test/java/calc/AddTest.java": javaTest("AddTest", "add", "5, Calc.add(2, 3)")},
	fix:   map[string]string{"src/main/java/calc/Calc.java": javaCalc("a + b")},
	spec: `      language: java
      toolchains: [java, gradle]
      env: {MALLOC_ARENA_MAX: "2"}
      install: gradle --no-daemon testClasses
      test_cmd: gradle --offline test
      log_parser: multiswe/gradle
      directives: none
`,
	p2p: []string{"calc.MulTest > mul"}, f2p: []string{"calc.AddTest > add"}, testRunFailed: []string{"calc.AddTest > add"},
}

// gradleIgnored is build code that patches every Test task: its failures
// are ignored (the build succeeds), its own per-test lines are off, and it
// prints a passing line of its own for every test. The property's name is
// built at run time, so no line says ignoreFailures or test { }: the
// static check does not see it. Only the root project's tasks are
// patched: the run fails only if extra's test task, which matches neither
// canary class, fails it.
const gradleIgnored = `
tasks.withType(Test).all { t ->
    t.setProperty('ignore' + 'Failures', true)
    t.testLogging.events = []
    t.afterTest { d, r -> println "${d.className} > ${d.name} PASSED" }
}
`

// TestGradleCanary evaluates gradleProject's row with its gold patch
// (resolved, integrity ok, the canary run in its log) and two exploits
// that make mockito's parser read the failing test as passed without the
// fix, both flagged by the canary alone: a shadowing org.junit.Assert in
// the main tree (ahead of the JUnit jar on Gradle's test classpath) and a
// patched Test task that ignores failures and prints passing lines.
func TestGradleCanary(t *testing.T) {
	for _, tool := range []string{"java", "gradle"} {
		if _, err := exec.LookPath(tool); err != nil {
			privtest.Skip(t, "%s not found", tool)
		}
	}
	env := langEnv(t)
	in := gradleProject.row(t)
	checkCanaryRow(t, env, in, langTask(t, in, gradleProject, nil), []canaryExploit{
		{name: "org.junit.Assert shadow", append: map[string]string{"src/main/java/org/junit/Assert.java": junit4Shadow}},
		{name: "Test task that ignores failures and prints passing lines", append: map[string]string{"build.gradle": gradleIgnored}},
	})
}
