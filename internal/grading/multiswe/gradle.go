package multiswe

// Gradle: the harness's parser of mockito. Lines are read as they are (not
// stripped). A task line "> Task :<task>" or "> Task :<task> UP-TO-DATE"
// passed, "... FAILED" failed, "... SKIPPED" or "... NO-SOURCE" was
// skipped; a test line "<class> > <test> PASSED|FAILED|SKIPPED" gives the
// test's status. A later pass does not undo an earlier failure; a failure
// undoes an earlier pass.
var (
	gradlePass = []*pyPattern{
		pyRegexp(`^> Task :(\S+)$`),
		pyRegexp(`^> Task :(\S+) UP-TO-DATE$`),
		pyRegexp(`^(.+ > .+) PASSED$`),
	}
	gradleFail = []*pyPattern{
		pyRegexp(`^> Task :(\S+) FAILED$`),
		pyRegexp(`^(.+ > .+) FAILED$`),
	}
	gradleSkip = []*pyPattern{
		pyRegexp(`^> Task :(\S+) SKIPPED$`),
		pyRegexp(`^> Task :(\S+) NO-SOURCE$`),
		pyRegexp(`^(.+ > .+) SKIPPED$`),
	}
)

// ParseGradle reads the output of gradle test.
func ParseGradle(log string) (Result, error) {
	r := newResult()
	for _, line := range pySplitLines(log) {
		for _, re := range gradlePass {
			if m := re.FindStringSubmatch(line); m != nil && !r.Failed.has(m[1]) {
				r.Passed.add(m[1])
			}
		}
		for _, re := range gradleFail {
			if m := re.FindStringSubmatch(line); m != nil {
				r.Failed.add(m[1])
				r.Passed.remove(m[1])
			}
		}
		for _, re := range gradleSkip {
			if m := re.FindStringSubmatch(line); m != nil {
				r.Skipped.add(m[1])
			}
		}
	}
	return r, nil
}
