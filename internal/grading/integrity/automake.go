package integrity

import "strings"

// Automake's make check (jq's harness) runs the programs of TESTS through
// the test driver its variables configure: LOG_COMPILER, LOG_DRIVER,
// TESTS_ENVIRONMENT ... A patch that sets LOG_COMPILER = true, or adds a
// check-local rule or a rule that rebuilds a test script, makes every test
// pass without touching a test file. The automake rule reads the changed
// lines of Makefile.am with the variable or rule each belongs to (a line
// after one ending in a backslash continues it; a recipe line belongs to
// the rule above it; the first lines of a hunk belong to the line its
// header names, as git writes it). A fix may add a test of its own
// (jqlang__jq-3161's gold patch appends tests/uritest to TESTS), so a test
// list that only grows is let through: every word its removed lines held
// is on its added lines, no new plain assignment (=, :=) resets it, and
// no make function rewrites it. An include line changed is flagged (the
// rule does not read the other file), and so is configure.ac's mention of
// a test variable: automake defines every AC_SUBST variable in the
// Makefile, LOG_COMPILER included. The hunk headers are trusted: a patch
// that names another line there, for a hunk that starts inside a test
// list of several lines, can drop a test from it unseen (which only loses
// that test's result).

// amTestVar names the variables of Automake's test harness.
var amTestVar = lazyRegexp(`^(TESTS|XFAIL_TESTS|TEST_EXTENSIONS|TEST_SUITE_LOG|TESTS_ENVIRONMENT|AM_TESTS_ENVIRONMENT|AM_TESTS_FD_REDIRECT|DISABLE_HARD_ERRORS|(\w+_)?LOG_(COMPILER|DRIVER|FLAGS|DRIVER_FLAGS)|AM_(\w+_)?LOG_(FLAGS|DRIVER_FLAGS)|check_\w+|\w+_LOG_COMPILE|TEST_LOGS|RECHECK_LOGS)$`)

// amGrowable are the test variables a fix may add to.
var amGrowable = map[string]bool{"TESTS": true, "check_PROGRAMS": true, "check_SCRIPTS": true, "check_LTLIBRARIES": true, "check_LIBRARIES": true, "check_DATA": true}

// amTestTarget names the rule targets of the test harness: check and its
// hooks, the log and result files, test scripts by their usual places and
// suffixes, and .PHONY (which makes an existing file's rule run).
var amTestTarget = lazyRegexp(`^(check(-\S*)?|recheck|test|tests|\.PHONY|\S*\.(log|trs|test)|tests?/\S*)$`)

var (
	amAssign      = lazyRegexp(`^(?:(?:override|export)\s+)*([A-Za-z_][A-Za-z0-9_.]*)\s*(\+=|:=|::=|\?=|!=|=)(.*)$`)
	amRule        = lazyRegexp(`^([^\s:=#][^:=#]*?)\s*::?(?:[^=]|$)`)
	amConditional = lazyRegexp(`^(if|else|endif)\b`)
	amInclude     = lazyRegexp(`^-?s?include\s`)
	amFunction    = lazyRegexp(`\$[({][a-z-]+\s`)
)

// amLine is a changed line of Makefile.am with what it belongs to.
type amLine struct {
	owner   string // a variable, rule targets, "?" (unknown), "" (none)
	isVar   bool   // owner is a variable
	op      string // the assignment's operator, on the line that assigns
	words   []string
	removed bool
}

// automakeFlags: the changes of s (a Makefile.am) touch the test harness
// otherwise than by adding tests.
func automakeFlags(s section) bool {
	removed := map[string]map[string]int{}
	added := map[string]map[string]int{}
	for _, l := range automakeLines(s.raw) {
		switch {
		case l.owner == "?":
			return true
		case l.owner == "":
			continue
		case !l.isVar:
			if amRuleIsTest(l.owner) {
				return true
			}
			continue
		case !amTestVar().MatchString(l.owner):
			continue
		case !amGrowable[l.owner]:
			return true
		}
		side := added
		if l.removed {
			side = removed
		} else if amFunction().MatchString(strings.Join(l.words, " ")) {
			return true
		}
		if side[l.owner] == nil {
			side[l.owner] = map[string]int{}
		}
		for _, w := range l.words {
			side[l.owner][w]++
		}
		if l.op == "=" || l.op == ":=" || l.op == "::=" || l.op == "!=" {
			side[l.owner]["\x00assign"]++
		}
	}
	for v, words := range removed {
		for w := range words {
			if w != "\x00assign" && added[v][w] == 0 {
				return true
			}
		}
	}
	for v, words := range added {
		if words["\x00assign"] > removed[v]["\x00assign"] {
			return true
		}
	}
	return false
}

// amRuleIsTest: one of a rule line's targets is the test harness's.
func amRuleIsTest(targets string) bool {
	for _, t := range strings.Fields(targets) {
		if amTestTarget().MatchString(t) {
			return true
		}
	}
	return false
}

// amSide follows one side (old or new) of a hunk: the line before and
// what the current line belongs to.
type amSide struct {
	prev      string
	owner     string
	isVar     bool
	rule      string // the rule whose recipe follows
	first     bool
	headerCtx string
}

// automakeLines reads the hunks of a Makefile.am diff: each changed line
// with its owner; conditional lines (if, else, endif) changed are given the
// owner "?" when a line of the diff (context or changed) belongs to a test
// variable, since wrapping the test list in a false condition drops it.
func automakeLines(raw string) []amLine {
	var out []amLine
	var old, cur amSide
	inHunk, testy, cond := false, false, false
	for _, l := range strings.Split(raw, "\n") {
		l = strings.TrimSuffix(l, "\r")
		if strings.HasPrefix(l, "@@") {
			ctx := ""
			if i := strings.Index(l[2:], "@@"); i >= 0 {
				ctx = strings.TrimSpace(l[2+i+2:])
			}
			old, cur, inHunk = newSide(ctx), newSide(ctx), true
			continue
		}
		if !inHunk || l == "" || l[0] != ' ' && l[0] != '+' && l[0] != '-' {
			continue
		}
		text := l[1:]
		if amConditional().MatchString(strings.TrimSpace(text)) && l[0] != ' ' {
			cond = true
		}
		switch l[0] {
		case ' ':
			old.step(text)
			cur.step(text)
			testy = testy || old.isVar && amTestVar().MatchString(old.owner)
		case '-':
			out = append(out, old.changed(text, true))
		case '+':
			out = append(out, cur.changed(text, false))
		}
		if last := len(out) - 1; last >= 0 && out[last].isVar && amTestVar().MatchString(out[last].owner) {
			testy = true
		}
	}
	if cond && testy {
		out = append(out, amLine{owner: "?"})
	}
	return out
}

// newSide starts a side of a hunk whose header names ctx: the first
// lines belong to what it defines (a variable, or the rule whose recipe
// may follow), if they continue it.
func newSide(ctx string) amSide {
	s := amSide{first: true, headerCtx: ctx}
	s.owner, s.isVar = amOwner(ctx)
	if !s.isVar {
		s.rule = s.owner
	}
	return s
}

// changed steps the side over a changed line and returns it with its owner.
func (s *amSide) changed(text string, removed bool) amLine {
	op, words := s.step(text)
	return amLine{owner: s.owner, isVar: s.isVar, op: op, words: words, removed: removed}
}

// step moves the side over one line: its owner, and for an assignment
// its operator and the words it adds (a continuation line's words).
func (s *amSide) step(text string) (op string, words []string) {
	first := s.first
	s.first = false
	continued := strings.HasSuffix(strings.TrimRight(s.prev, " \t"), "\\")
	s.prev = text
	body := strings.TrimSpace(text)
	switch {
	case continued:
		// same owner
	case first && (strings.HasPrefix(text, " ") || strings.HasPrefix(text, "\t")) && s.headerCtx == "":
		// the hunk starts inside something git's header does not name
		s.owner, s.isVar = "?", false
	case first && (strings.HasPrefix(text, " ") || strings.HasPrefix(text, "\t")):
		// inside what the header names (newSide)
	case strings.HasPrefix(text, "\t") && s.rule != "":
		s.owner, s.isVar = s.rule, false
	case body == "" || strings.HasPrefix(body, "#"):
		s.owner, s.isVar = "", false
		if body == "" {
			s.rule = ""
		}
		return "", nil
	case amInclude().MatchString(body):
		// another file's lines, which the rule does not read
		s.owner, s.isVar = "?", false
		return "", nil
	case amConditional().MatchString(body):
		// a conditional decides which assignments and recipe lines count
		// (automakeLines); a recipe goes on under it
		s.owner, s.isVar = "", false
		return "", nil
	default:
		if m := amAssign().FindStringSubmatch(body); m != nil {
			s.owner, s.isVar, s.rule = m[1], true, ""
			return m[2], amWords(m[3])
		}
		s.owner, s.isVar = amOwner(body)
		s.rule = ""
		if !s.isVar {
			s.rule = s.owner
		}
		return "", nil
	}
	if s.isVar {
		return "", amWords(body)
	}
	return "", nil
}

// amOwner is what a non-continuation line defines: a variable or a rule's
// targets; "" for anything else.
func amOwner(line string) (string, bool) {
	line = strings.TrimSpace(line)
	if m := amAssign().FindStringSubmatch(line); m != nil {
		return m[1], true
	}
	if m := amRule().FindStringSubmatch(line); m != nil {
		return m[1], false
	}
	return "", false
}

// amWords are the words of an assignment's value, without the
// continuation backslash.
func amWords(v string) []string {
	var out []string
	for _, w := range strings.Fields(v) {
		if w != "\\" {
			out = append(out, w)
		}
	}
	return out
}
