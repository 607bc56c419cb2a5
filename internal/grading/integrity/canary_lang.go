package integrity

import (
	"fmt"
	"path"
	"strings"
)

// Canaries in other languages. The Python canary's file is fixed when the
// canary is drawn; a Go or Rust canary's place depends on the repository
// (the package clause of the test file beside it, the crate holding it),
// so its script finds that at run time, from the test patch's files that
// exist after the patch, and runs only the two canaries with the
// language's own runner:
//
//   - go test: a _test.go file in the directory of the first test file of
//     the patch, in that file's package (so the package under test and its
//     TestMain load), run with go test -run selecting the two tests;
//   - cargo test: an integration test (tests/<name>.rs) of the crate
//     holding the first Rust file of the patch, run with cargo test --test.
//     A crate with autotests = false, or of edition 2015 with a [[test]]
//     table, builds only the test targets its Cargo.toml names: there
//     the canary's is appended to it for the run (a [[test]] of the
//     canary's file) and the file put back after;
//   - Maven (canary_java.go), Gradle (canary_gradle.go), Jest, Mocha or
//     Vitest (canary_javascript.go), CTest (canary_ctest.go) and Automake's
//     make check (canary_automake.go).
//
// Their names, file names and values are drawn words (DrawNames). None
// asks the harness's parsers anything new: each runner prints the lines
// the instance's parser reads, but for Gradle, whose statuses are its own
// report files (Report).

// Languages a canary is drawn for besides Python.
const (
	canaryGo   = "go"
	canaryRust = "rust"
)

var (
	goTestCmd    = lazyRegexp(`(^|[\s;&|(])go\s+test(\s|$)`)
	cargoTestCmd = lazyRegexp(`(^|[\s;&|(])cargo\s+(\+\S+\s+)?test(\s|$)`)
	// ctestCmd: ctest as a command name (not a path), which the CTest
	// canary's shell function stands in for.
	ctestCmd = lazyRegexp(`(^|[\s;&|(])ctest($|[\s;&|)])`)
)

// langCanary draws the canary of testCmd's runner, or returns ok false
// when the command is no runner it knows.
func langCanary(testCmd string, testFiles []string) (c Canary, ok bool) {
	var lang, suffix string
	switch {
	case goTestCmd().MatchString(testCmd):
		lang, suffix = canaryGo, "_test.go"
	case cargoTestCmd().MatchString(testCmd):
		lang, suffix = canaryRust, ".rs"
	case mavenCmd().MatchString(testCmd):
		return javaCanary(testCmd, testFiles), true
	case gradleCmd().MatchString(testCmd):
		return gradleCanary(testCmd, testFiles), true
	case ctestCmd().MatchString(testCmd):
		return ctestCanary(testCmd, testFiles), true
	case makeCheckCmd().MatchString(testCmd):
		return automakeCanary(testCmd, testFiles), true
	case jsCmd().MatchString(testCmd):
		return jsCanary(testCmd, testFiles), true
	default:
		return Canary{}, false
	}
	var cands []string
	for _, f := range testFiles {
		if strings.HasSuffix(f, suffix) && !strings.HasPrefix(f, "/") && !strings.Contains(f, "..") {
			cands = append(cands, f)
		}
	}
	if len(cands) == 0 {
		return Canary{Note: fmt.Sprintf("canary skipped: the test patch touches no %s file", suffix)}, true
	}
	names := DrawNames(4, 3)
	c = Canary{Token: token(), lang: lang, candidates: cands, value: names[3].Snake()}
	switch lang {
	case canaryGo:
		c.Pass, c.Fail = "Test"+names[0].Camel(), "Test"+names[1].Camel()
		c.File = names[2].Snake() + "_test.go"
		c.Command = fmt.Sprintf("go test -v -count=1 -run '^(%s|%s)$' .", c.Pass, c.Fail)
	case canaryRust:
		c.Pass, c.Fail = names[0].Snake(), names[1].Snake()
		c.File = names[2].Snake() + ".rs"
		c.Command = "cargo test --test " + names[2].Snake()
	}
	return c, true
}

// goSource is the Go canary file; its package clause is set at run time.
func (c Canary) goSource() string {
	return fmt.Sprintf(`package MSBCANARYPKG

import "testing"

func %s(t *testing.T) {
	got, want := "%s", "%s"
	if got != want {
		t.Fatalf("%%q != %%q", got, want)
	}
}

func %s(t *testing.T) {
	got := "%s"
	want := got + "_"
	if got != want {
		t.Fatalf("%%q != %%q", got, want)
	}
}
`, c.Pass, c.value, c.value, c.Fail, c.value)
}

// rustSource is the Rust canary file.
func (c Canary) rustSource() string {
	return fmt.Sprintf(`#[test]
fn %s() {
    let got = String::from("%s");
    assert_eq!(got, "%s");
}

#[test]
fn %s() {
    let got = String::from("%s");
    assert_eq!(got, "%s_");
}
`, c.Pass, c.value, c.value, c.Fail, c.value, c.value)
}

// skipLine is what a language canary's run prints when the repository
// cannot take it.
func (c Canary) skipLine() string { return "msb canary skipped " + c.Token + ": " }

// langScript is the shell text of a language canary: find the first
// candidate file present after the patch, write the canary beside it (Go,
// Java, JavaScript) or into its crate's tests/ (Rust), run the two tests
// between the markers in a subshell, remove what it wrote.
func (c Canary) langScript() string {
	var b strings.Builder
	delim := "MSB_CANARY_" + c.Token
	quoted := make([]string, len(c.candidates))
	for i, f := range c.candidates {
		quoted[i] = quote(f)
	}
	fmt.Fprintf(&b, "echo '%s'\n(\nf=\nfor x in %s; do if [ -f \"$x\" ]; then f=$x; break; fi; done\n", c.Start(), strings.Join(quoted, " "))
	fmt.Fprintf(&b, "if [ -z \"$f\" ]; then echo '%sno test file of the patch is present'; exit 0; fi\n", c.skipLine())
	switch c.lang {
	case canaryGo:
		b.WriteString("cd \"$(dirname \"$f\")\" || exit 0\n")
		b.WriteString("pkg=$(sed -n 's/^package[[:space:]]\\{1,\\}\\([A-Za-z0-9_]\\{1,\\}\\).*/\\1/p' \"$(basename \"$f\")\" | head -n 1)\n")
		fmt.Fprintf(&b, "sed \"s/^package MSBCANARYPKG\\$/package $pkg/\" > %s <<'%s'\n%s%s\n", quote(c.File), delim, c.goSource(), delim)
	case canaryRust:
		b.WriteString("d=$(dirname \"$f\")\nwhile [ \"$d\" != . ] && [ \"$d\" != / ] && [ ! -f \"$d/Cargo.toml\" ]; do d=$(dirname \"$d\"); done\n")
		b.WriteString("cd \"$d\" || exit 0\n")
		// A crate with autotests = false builds only the test targets it
		// names, and so does one of edition 2015 that names any (old
		// ripgrep's): name the canary's too, and put the file back after.
		// A named target that is also found by its path is built once.
		fmt.Fprintf(&b, "ct=\nif grep -Eq '^[[:space:]]*autotests[[:space:]]*=[[:space:]]*false|^[[:space:]]*\\[\\[[[:space:]]*test[[:space:]]*\\]\\]' Cargo.toml; then\n"+
			"ct=$(mktemp) && cp Cargo.toml \"$ct\" && printf '\\n[[test]]\\nname = \"%s\"\\npath = \"tests/%s\"\\n' >> Cargo.toml || { echo '%sCargo.toml cannot take its test target'; exit 0; }\nfi\n",
			strings.TrimSuffix(c.File, ".rs"), c.File, c.skipLine())
		fmt.Fprintf(&b, "mkdir -p tests && cat > tests/%s <<'%s'\n%s%s\n", quote(c.File), delim, c.rustSource(), delim)
	case canaryJava:
		b.WriteString(c.javaPlace())
	case canaryGradle:
		b.WriteString(c.gradlePlace())
	case canaryJS:
		b.WriteString(c.jsPlace())
	case canaryCTest:
		b.WriteString(c.ctestPlace())
	case canaryAutomake:
		b.WriteString(c.automakePlace())
	}
	b.WriteString(c.Command + "\n")
	switch c.lang {
	case canaryGradle:
		b.WriteString(c.gradleReport())
	case canaryAutomake:
		b.WriteString(c.automakeReport())
	case canaryCTest:
		b.WriteString(c.ctestReport())
	case canaryRust:
		b.WriteString("if [ -n \"$ct\" ]; then cat \"$ct\" > Cargo.toml; rm -f \"$ct\"; fi\n")
	}
	fmt.Fprintf(&b, "rm -f %s\n)\necho '%s'\n", c.placed(), c.End())
	return b.String()
}

// placed is the canary file's path relative to the directory its run
// changed into.
func (c Canary) placed() string {
	switch c.lang {
	case canaryRust:
		return quote(path.Join("tests", c.File))
	case canaryJava:
		return "\"$d\"/" + quote(c.Pass+".java") + " \"$d\"/" + quote(c.Fail+".java")
	case canaryGradle:
		return "\"$d\"/" + quote(c.Pass+".java") + " \"$d\"/" + quote(c.Fail+".java") + " \"$i\""
	case canaryJS:
		return "\"$h\" \"$a\""
	case canaryCTest:
		return "\"$b1\" \"$b2\" \"$lk\""
	case canaryAutomake:
		return "\"$w\"/" + quote(c.Pass) + " \"$w\"/" + quote(c.Fail) + " \"$k\""
	}
	return quote(c.File)
}

// Skipped returns, for a language canary whose run said the repository
// cannot take it, why; "" otherwise. Only the script's own line counts:
// the line must be the first of the canary's output but for bash's trace
// of the script (the evaluation's script runs under set -x: lines that
// start with +).
func (c Canary) Skipped(out string) string {
	if c.lang == "" {
		return ""
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "+") {
			continue
		}
		if why, ok := strings.CutPrefix(line, c.skipLine()); ok {
			return "canary skipped: " + why
		}
		return ""
	}
	return ""
}

// packageEntry reports whether id is what a parser makes of the line that
// sums up the canary's file, which the failing canary brings with it: go
// test's package line ("FAIL <package>"; Go's test functions are all
// named Test..., a package path never is) or Jest's suite line ("FAIL
// <dir>/<file>.test.js", its file named c.File and a suffix).
func (c Canary) packageEntry(id string) bool {
	switch c.lang {
	case canaryGo:
		return !strings.HasPrefix(id, "Test")
	case canaryJS:
		return strings.Contains(id, c.File)
	}
	return false
}
