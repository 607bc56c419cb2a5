package grading

// The harness's Java parsers (swebench 5.0.2 log_parsers/java.py):
// Maven run once per test class with set -x (gson, druid, javaparser),
// Ant's JUnit lines (lombok) and Gradle's per-test lines after the
// harness's pre-install patch of the build (lucene, rxjava).

func init() {
	registerMultilingual("maven", ParseMaven)
	registerMultilingual("ant", ParseAnt)
	registerMultilingual("gradle_custom", ParseGradleCustom)
}

var (
	mavenTestName = pyRegexp(`^.*-Dtest=(\S+).*$`)
	mavenResult   = pyRegexp(`^.*BUILD (SUCCESS|FAILURE)$`)
	antLine       = pyRegexp(`^\s*\[junit\]\s+\[(PASS|FAIL|ERR)\]\s+(.*)$`)
	gradleFull    = pyRegexp(`^([^>].+)\s+(PASSED|FAILED)$`)
	gradleName    = pyRegexp(`^([^>]\S*\s+>\s+\S+)$`)
	gradleStatus  = pyRegexp(`^(PASSED|FAILED)$`)
)

var mavenStatus = map[string]Status{"SUCCESS": Passed, "FAILURE": Failed}

// ParseMaven is the harness's parse_log_maven: the status of a test is the
// BUILD SUCCESS or FAILURE that follows the command line naming it with
// -Dtest=; commands and results are paired first come, first served, and
// results that came before any command are paired with the commands left
// over at the end.
func ParseMaven(log string) StatusMap {
	out := StatusMap{}
	var pending, unmatched []string
	for _, line := range pyLines(log) {
		line = pyStrip(line)
		if m := mavenTestName.FindStringSubmatch(line); m != nil {
			pending = append(pending, m[1])
		}
		if m := mavenResult.FindStringSubmatch(line); m != nil {
			if len(pending) == 0 {
				unmatched = append(unmatched, m[1])
				continue
			}
			out[pending[0]] = mavenStatus[m[1]]
			pending = pending[1:]
		}
	}
	for len(pending) > 0 && len(unmatched) > 0 {
		out[pending[0]] = mavenStatus[unmatched[0]]
		pending, unmatched = pending[1:], unmatched[1:]
	}
	return out
}

// ParseAnt is the harness's parse_log_ant.
func ParseAnt(log string) StatusMap {
	return matchLines(log, antLine, true, byWord(2, 1, map[string]Status{"PASS": Passed, "FAIL": Failed, "ERR": Failed}))
}

// ParseGradleCustom is the harness's parse_log_gradle_custom: "Class >
// test PASSED" on one line, or the name on one line and PASSED or FAILED
// alone on a later one (Gradle's output interleaved with the tests').
func ParseGradleCustom(log string) StatusMap {
	out := StatusMap{}
	words := map[string]Status{"PASSED": Passed, "FAILED": Failed}
	pending := ""
	for _, line := range pyLines(log) {
		line = pyStrip(line)
		if m := gradleFull.FindStringSubmatch(line); m != nil {
			out[m[1]] = words[m[2]]
			pending = ""
			continue
		}
		if m := gradleName.FindStringSubmatch(line); m != nil {
			pending = m[1]
			continue
		}
		if pending != "" {
			if m := gradleStatus.FindStringSubmatch(line); m != nil {
				out[pending] = words[m[1]]
				pending = ""
			}
		}
	}
	return out
}
