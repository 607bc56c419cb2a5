package integrity

import (
	"fmt"
	"strings"
)

// The Maven canary: two JUnit test classes named with drawn words
// (<Words>Test, DrawNames), one test each, one that must pass and one
// that must fail, written into the package directory of the first Java
// test file of the test patch (so the module's test classpath, with the
// main classes ahead of the JUnit jar, compiles and runs them), and run
// by the instance's own Maven command with its test selection replaced by
// the two classes. Surefire reports a class, not a method, which is why
// the two tests are two classes. The JUnit flavour is the test file's,
// found at run time: JUnit 5 (org.junit.jupiter), JUnit 4 (org.junit),
// JUnit 3 (junit.framework); each canary asserts with that flavour's
// assertEquals, the assertion a patch would disable (a shadowing
// org.junit.Assert in the main tree, say). A test file on TestNG cannot
// take it: the run says so.

const canaryJava = "java"

// mavenCmd matches Maven's launchers: mvn, the Maven daemon, the wrapper.
var (
	mavenCmd    = lazyRegexp(`(^|[\s;&|(/])(mvn|mvnd|mvnw)(\s|$)`)
	mavenSelect = lazyRegexp(`\s-D(test|surefire\.failIfNoSpecifiedTests|failIfNoTests)=\S*`)
)

// javaCanary draws the Maven canary for testCmd, whose last line must be
// the Maven run (a command before it on that line, such as a cd, stays).
func javaCanary(testCmd string, testFiles []string) Canary {
	c, last := drawJava(testCmd, testFiles, canaryJava, "Maven", mavenCmd().MatchString)
	if c.Active() {
		c.Command = mavenSelect().ReplaceAllString(last, "") +
			fmt.Sprintf(" -Dtest=%s,%s -DfailIfNoTests=false -Dsurefire.failIfNoSpecifiedTests=false", c.Pass, c.Fail)
	}
	return c
}

// drawJava draws a JVM canary of language lang (canaryJava, canaryGradle)
// for testCmd, whose last line (returned) must run tool (isTool: its
// launcher is in the text), and the Java files of testFiles under
// src/test/; a canary with a Note when there is none or tool is not last.
func drawJava(testCmd string, testFiles []string, lang, tool string, isTool func(string) bool) (Canary, string) {
	var cands []string
	for _, f := range testFiles {
		if strings.HasSuffix(f, ".java") && safePath(f) && strings.Contains("/"+f, "/src/test/") {
			cands = append(cands, f)
		}
	}
	if len(cands) == 0 {
		return Canary{Note: "canary skipped: the test patch touches no Java file under src/test/"}, ""
	}
	lines := strings.Split(strings.TrimSpace(testCmd), "\n")
	last := lines[len(lines)-1]
	if i := strings.LastIndexAny(last, ";&|"); i >= 0 && !isTool(last[i:]) {
		return Canary{Note: "canary skipped: " + tool + " is not the last command of the test command"}, ""
	}
	names := DrawNames(3, 3)
	c := Canary{Token: token(), lang: lang, candidates: cands, value: names[2].Snake()}
	c.Pass, c.Fail = names[0].Camel()+"Test", names[1].Camel()+"Test"
	c.File = c.Fail + ".java"
	return c, last
}

func safePath(f string) bool { return !strings.HasPrefix(f, "/") && !strings.Contains(f, "..") }

// javaSource is one canary class in flavour ("3", "4" or "5"); its
// package clause is set at run time.
func (c Canary) javaSource(flavour, class, want string) string {
	var body string
	switch flavour {
	case "5":
		body = fmt.Sprintf(`    @org.junit.jupiter.api.Test
    public void check() {
        org.junit.jupiter.api.Assertions.assertEquals("%s", new String("%s"));
    }`, want, c.value)
	case "4":
		body = fmt.Sprintf(`    @org.junit.Test
    public void check() {
        org.junit.Assert.assertEquals("%s", new String("%s"));
    }`, want, c.value)
	default:
		body = fmt.Sprintf(`    public void testCheck() {
        assertEquals("%s", new String("%s"));
    }`, want, c.value)
	}
	extends := ""
	if flavour == "3" {
		extends = " extends junit.framework.TestCase"
	}
	return fmt.Sprintf("package MSBCANARYPKG;\n\npublic class %s%s {\n%s\n}\n", class, extends, body)
}

// javaPlace is the part of the script that writes the two classes beside
// the test file $f, in its package, with its JUnit flavour.
func (c Canary) javaPlace() string {
	var b strings.Builder
	delim := "MSB_CANARY_" + c.Token
	b.WriteString("d=$(dirname \"$f\")\n")
	b.WriteString("pkg=$(sed -n 's/^[[:space:]]*package[[:space:]]\\{1,\\}\\([A-Za-z0-9_.]\\{1,\\}\\)[[:space:]]*;.*/\\1/p' \"$f\" | head -n 1)\n")
	b.WriteString("if [ -n \"$pkg\" ]; then pkgline=\"package $pkg;\"; else pkgline=; fi\n")
	fmt.Fprintf(&b, "if grep -q 'org\\.testng' \"$f\"; then echo '%sthe test file runs on TestNG'; exit 0; fi\n", c.skipLine())
	b.WriteString("if grep -q 'org\\.junit\\.jupiter' \"$f\"; then v=5; elif grep -q 'org\\.junit\\.' \"$f\"; then v=4; " +
		"elif grep -q 'junit\\.framework' \"$f\"; then v=3; else v=4; fi\n")
	b.WriteString("case $v in\n")
	for _, v := range []string{"3", "4", "5"} {
		fmt.Fprintf(&b, "%s)\n", v)
		for _, t := range []struct{ class, want string }{{c.Pass, c.value}, {c.Fail, c.value + "_"}} {
			fmt.Fprintf(&b, "sed \"s/^package MSBCANARYPKG;\\$/$pkgline/\" > \"$d\"/%s <<'%s'\n%s%s\n",
				quote(t.class+".java"), delim, c.javaSource(v, t.class, t.want), delim)
		}
		b.WriteString(";;\n")
	}
	b.WriteString("esac\n")
	return b.String()
}
