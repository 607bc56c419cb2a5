package integrity

import "strings"

// A CMake change may add a test of its own: catchorg__Catch2-1616's fix
// adds add_test(NAME BenchmarkingMacros ...) and its set_tests_properties
// to projects/ExtraTests/CMakeLists.txt. A new test leaves the statuses of
// the others as they were: a second test of an existing name gives that
// name two statuses, which the harness's result refuses. (A new test runs
// a command of the patch's choosing, as the build's own execute_process
// and custom commands already do, which no rule reads.) So the ctest rule
// lets a file through when its changed test-list lines only add tests:

// addsOwnTests: no removed line touches the test list, and every added
// line that does is inside an added call (wholly in one run of added
// lines) that is an add_test, or a set_tests_properties naming only tests
// the patch adds.
func addsOwnTests(changed []changedLine) bool {
	var runs [][]string
	last := -1
	for _, l := range changed {
		if l.removed {
			if ctestLines().MatchString(l.text) {
				return false
			}
			continue
		}
		if l.run != last || len(runs) == 0 {
			runs = append(runs, nil)
			last = l.run
		}
		runs[len(runs)-1] = append(runs[len(runs)-1], l.text)
	}
	added := map[string]bool{}
	var named [][]string // the tests of each set_tests_properties
	for _, run := range runs {
		calls, rest, ok := cmakeCalls(uncomment(run))
		if !ok || ctestLines().MatchString(rest) {
			return false
		}
		for _, c := range calls {
			switch strings.ToLower(c.name) {
			case "add_test":
				n := testName(c.args)
				if n == "" {
					return false
				}
				added[n] = true
			case "set_tests_properties":
				tests := propertyTargets(c.args)
				if len(tests) == 0 {
					return false
				}
				named = append(named, tests)
			default:
				if ctestLines().MatchString(c.name + "(" + strings.Join(c.args, " ") + ")") {
					return false
				}
			}
		}
	}
	for _, tests := range named {
		for _, n := range tests {
			if !added[n] {
				return false
			}
		}
	}
	return true
}

// cmakeCall is one command invocation: its name and its arguments, unquoted.
type cmakeCall struct {
	name string
	args []string
}

var cmakeCommand = lazyRegexp(`[A-Za-z_][A-Za-z0-9_]*\s*\(`)

// cmakeCalls finds the command invocations of text, a run of whole lines,
// and returns them with the text outside them; ok is false when a call's
// parentheses do not close within text.
func cmakeCalls(text string) (calls []cmakeCall, rest string, ok bool) {
	var out strings.Builder
	for {
		loc := cmakeCommand().FindStringIndex(text)
		if loc == nil {
			out.WriteString(text)
			return calls, out.String(), true
		}
		out.WriteString(text[:loc[0]])
		name := strings.TrimSpace(strings.TrimSuffix(text[loc[0]:loc[1]], "("))
		args, n, closed := cmakeArgs(text[loc[1]:])
		if !closed {
			return nil, "", false
		}
		calls = append(calls, cmakeCall{name: name, args: args})
		text = text[loc[1]+n:]
	}
}

// cmakeArgs splits the arguments that start s, up to the parenthesis that
// closes the call, and returns them, how many bytes they took (the closing
// parenthesis included), and whether it closed. Quoted arguments lose their
// quotes; nested parentheses stay in the arguments.
func cmakeArgs(s string) (args []string, n int, closed bool) {
	depth, quoted := 0, false
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			args = append(args, cur.String())
			cur.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted && c == '\\' && i+1 < len(s):
			cur.WriteByte(s[i+1])
			i++
		case c == '"':
			quoted = !quoted
		case quoted:
			cur.WriteByte(c)
		case c == '(':
			depth++
			cur.WriteByte(c)
		case c == ')' && depth == 0:
			flush()
			return args, i + 1, true
		case c == ')':
			depth--
			cur.WriteByte(c)
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			flush()
		default:
			cur.WriteByte(c)
		}
	}
	return nil, 0, false
}

// testName is the name add_test's arguments give the test: NAME <name>,
// or the first argument in the old signature.
func testName(args []string) string {
	if len(args) >= 2 && args[0] == "NAME" {
		return args[1]
	}
	if len(args) >= 1 && args[0] != "NAME" {
		return args[0]
	}
	return ""
}

// propertyTargets are the tests set_tests_properties' arguments name: the
// ones before PROPERTIES (none when PROPERTIES is missing).
func propertyTargets(args []string) []string {
	for i, a := range args {
		if a == "PROPERTIES" {
			return args[:i]
		}
	}
	return nil
}

var cmakeComment = lazyRegexp(`^\s*#`)

// uncomment joins lines, leaving out the whole-line comments.
func uncomment(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		if !cmakeComment().MatchString(l) {
			b.WriteString(l)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
