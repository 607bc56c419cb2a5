package integrity

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// The Automake canary: two test scripts named with drawn words
// (DrawNames), one that must pass and one that must fail, written beside
// the first file of the test patch and run by the `make check` of the
// Makefile.am nearest it, under automake's parallel test harness: the
// Makefile's own LOG_DRIVER, LOG_COMPILER, TESTS_ENVIRONMENT and check
// rules, the harness's test-driver. The instance's test command runs as in
// the harness's run (autoreconf, configure, the build), its output
// discarded, and its make, a shell function here, gives make check the
// two scripts as TESTS on the command line. A command-line variable
// reaches every sub-make of a recursive build (jq's SUBDIRS, oniguruma's
// own TESTS), so TESTS holds the two only in the directory whose source
// holds them ($(wildcard $(srcdir)/...), GNU make) and is empty elsewhere.
//
// The statuses are automake's own: the .trs file the test driver writes
// for each test (":test-result: PASS"), printed behind the canary's token
// after the run (Report), and checked against what the instance's parser
// reads of the run's log (CrossCheck), so a patch that prints result lines
// of its own is seen in either.
//
// A directory without a Makefile.am above the test file, or a build on
// automake's serial-tests harness (no .trs files), takes no canary: the
// run says so and the evaluation carries the note.

const canaryAutomake = "automake"

// makeCheckCmd matches make check as a command name (not a path), which
// the Automake canary's shell function stands in for.
var makeCheckCmd = lazyRegexp(`(^|[\s;&|(])make(\s+\S+)*\s+check($|[\s;&|)])`)

// automakeCanary draws the Automake canary for testCmd.
func automakeCanary(testCmd string, testFiles []string) Canary {
	var cands []string
	for _, f := range testFiles {
		if safePath(f) {
			cands = append(cands, f)
		}
	}
	if len(cands) == 0 {
		return Canary{Note: "canary skipped: the test patch touches no file"}
	}
	names := DrawNames(4, 2)
	c := Canary{Token: token(), lang: canaryAutomake, candidates: cands, value: names[3].Snake()}
	c.Pass, c.Fail = names[0].Snake(), names[1].Snake()
	c.Command = "{\n" + strings.TrimSpace(testCmd) + "\n} >/dev/null 2>&1 </dev/null"
	return c
}

// automakeScript is a canary test: it compares a drawn word with itself
// (pass) or with the word and a suffix (fail).
func (c Canary) automakeScript(fail bool) string {
	want := c.value
	if fail {
		want += "_"
	}
	return fmt.Sprintf("#!/bin/sh\ngot='%s'\nwant='%s'\nif [ \"$got\" != \"$want\" ]; then echo \"$got != $want\"; exit 1; fi\n", c.value, want)
}

// automakePlace is the part of the script that finds the Makefile.am
// nearest the test file $f (its directory $m), notes a build without one
// or on the serial harness, writes the two scripts into $f's directory
// ($w, $p and $q the scripts' paths relative to $m) and defines make as a
// function that runs make check on the two, its output to the script's
// (descriptor 3), the test command's own output going nowhere.
func (c Canary) automakePlace() string {
	var b strings.Builder
	b.WriteString("r=$(pwd)\nw=$(dirname \"$f\")\nm=$w\n")
	b.WriteString("while [ \"$m\" != . ] && [ \"$m\" != / ] && [ ! -f \"$m/Makefile.am\" ]; do m=$(dirname \"$m\"); done\n")
	fmt.Fprintf(&b, "if [ ! -f \"$m/Makefile.am\" ]; then echo '%sno Makefile.am holds the test file'; exit 0; fi\n", c.skipLine())
	fmt.Fprintf(&b, "if grep -qsw serial-tests configure.ac configure.in \"$m/Makefile.am\"; then echo '%sthe build runs automake'\"'\"'s serial-tests harness, which writes no .trs files'; exit 0; fi\n", c.skipLine())
	b.WriteString("if [ \"$m\" = \"$w\" ]; then s=; elif [ \"$m\" = . ]; then s=$w/; else s=${w#\"$m\"/}/; fi\n")
	fmt.Fprintf(&b, "p=${s}%s; q=${s}%s\n", c.Pass, c.Fail)
	delim := "MSB_CANARY_" + c.Token
	for _, t := range []struct {
		name string
		fail bool
	}{{c.Pass, false}, {c.Fail, true}} {
		fmt.Fprintf(&b, "cat > \"$w\"/%s <<'%s'\n%s%s\nchmod +x \"$w\"/%s\n", quote(t.name), delim, c.automakeScript(t.fail), delim, quote(t.name))
	}
	fmt.Fprintf(&b, "k=$(mktemp) || exit 0\nsed \"s|MSBCANARYDIR/|$s|g\" > \"$k\" <<'%s'\n%s%s%s\n", delim, c.automakeRule(c.Pass), c.automakeRule(c.Fail), delim)
	b.WriteString("w=$r/$w\nexec 3>&1\n")
	// the function's body holds TESTS literally: no variable of the
	// environment names the canary
	b.WriteString("eval \"make() { case \\\" \\$* \\\" in *' check '*) command make \\\"\\$@\\\" " +
		"TESTS='\\$(if \\$(wildcard \\$(srcdir)/$p),$p $q)' MAKEFILES=\\\"$k\\\" >&3 2>&3 ;; *) command make \\\"\\$@\\\" ;; esac; }\"\nexport -f make\n")
	return b.String()
}

// automakeRule is the make rule that runs the canary test name, as
// automake writes it for a test of TESTS without an extension (automake
// 1.13 to 1.16): a test given on the command line has no rule of the
// Makefile's. It is read from MAKEFILES (every sub-make reads it too,
// before its Makefile), the test's directory relative to the Makefile.am
// put for MSBCANARYDIR/ at run time.
func (c Canary) automakeRule(name string) string {
	t := "MSBCANARYDIR/" + name
	return t + ".log: " + t + "\n" +
		"\t@p='" + t + "'; \\\n\tb='" + t + "'; \\\n" +
		"\t$(am__check_pre) $(LOG_DRIVER) --test-name \"$$f\" \\\n" +
		"\t--log-file $$b.log --trs-file $$b.trs \\\n" +
		"\t$(am__common_driver_flags) $(AM_LOG_DRIVER_FLAGS) $(LOG_DRIVER_FLAGS) -- $(LOG_COMPILE) \\\n" +
		"\t\"$$tst\" $(AM_TESTS_FD_REDIRECT)\n"
}

// automakeReport is the part of the Automake canary's script right after
// its run: the .trs files of the two tests, each base64 on one line.
func (c Canary) automakeReport() string {
	var b strings.Builder
	fmt.Fprintf(&b, "find \"$r\" -name .git -prune -o -type f \\( -name %s -o -name %s \\) -print |\n", quote(c.Pass+".trs"), quote(c.Fail+".trs"))
	fmt.Fprintf(&b, "  while IFS= read -r x; do echo \"%strs $(basename \"$x\" .trs) $(base64 < \"$x\" | tr -d '\\n')\"; done\n", c.reportLine())
	fmt.Fprintf(&b, "rm -f \"$w\"/%[1]s.log \"$w\"/%[1]s.trs \"$w\"/%[2]s.log \"$w\"/%[2]s.trs\n", quote(c.Pass), quote(c.Fail))
	return b.String()
}

// automakeStatuses reads the .trs lines of out: test name to PASSED,
// FAILED, ERROR, SKIPPED, or XFAIL and XPASS (a failure or pass the
// Makefile expects to fail). A test with several results counts its
// worst, as automake's summary does.
func (c Canary) automakeStatuses(out string) map[string]string {
	statuses := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, c.reportLine()+"trs ")
		if !ok {
			continue
		}
		name, enc, ok := strings.Cut(strings.TrimSpace(rest), " ")
		if !ok {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(raw), "\n") {
			v, ok := strings.CutPrefix(l, ":test-result:")
			if !ok {
				continue
			}
			st := trsStatus(strings.TrimSpace(v))
			if trsRank[st] >= trsRank[statuses[name]] {
				statuses[name] = st
			}
		}
	}
	return statuses
}

// trsStatus maps a .trs result word to the parsers' status words.
func trsStatus(w string) string {
	switch w {
	case "PASS":
		return "PASSED"
	case "FAIL":
		return "FAILED"
	case "SKIP":
		return "SKIPPED"
	case "ERROR", "XFAIL", "XPASS":
		return w
	}
	return "UNKNOWN"
}

// trsRank orders results from best to worst.
var trsRank = map[string]int{"": 0, "PASSED": 1, "SKIPPED": 2, "XFAIL": 3, "XPASS": 4, "FAILED": 5, "ERROR": 6, "UNKNOWN": 7}

// CrossCheck compares the canary's own report (Report's statuses) with
// what the instance's parser read of its run's log (parsed): the reasons
// a canary test's status differs, where the parser reads such a status
// (automake's parsers read PASS, FAIL and SKIP lines only). Nil for a
// canary whose log is not expected to agree (Gradle's testLogging).
func (c Canary) CrossCheck(own, parsed map[string]string) []string {
	if !c.Active() || c.lang != canaryAutomake {
		return nil
	}
	var reasons []string
	for _, n := range []string{c.Pass, c.Fail} {
		want := own[n]
		if want != "PASSED" && want != "FAILED" && want != "SKIPPED" {
			want = ""
		}
		got := ""
		for id, st := range parsed {
			if names(id, n) {
				got = st
			}
		}
		if got != want {
			reasons = append(reasons, fmt.Sprintf("canary: the log reports a test %s that automake's .trs file reports %s",
				statusWord(got), statusWord(own[n])))
		}
	}
	return reasons
}

// statusWord is a status for a reason: lower case, "nothing" for none.
func statusWord(st string) string {
	if st == "" {
		return "nothing"
	}
	return strings.ToLower(st)
}
