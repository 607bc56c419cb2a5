package integrity

import (
	"path"
	"slices"
	"strings"

	"github.com/minisandbox/msb/internal/patch"
)

// Where the makefile is known whole (the base file, or a file the patch
// creates), the automake rule does not read hunks: it reads the file
// before and after the patch into the same model, amModel, and compares
// what make check depends on. That is the test variables (amTestVar) and
// every variable their values name, transitively, each assignment with
// the conditionals around it (automake's if/else/endif and make's
// ifeq/ifdef ...); the rules whose target is make check's (amTestTarget),
// a test of those variables or its .log/.trs file, a pattern or a suffix
// rule; include lines; and any line that is none of these (an $(eval ...)
// can define anything). A test list may grow (TESTS, check_*, and the
// variables only they name): each of its assignments keeps its
// conditionals, its operator and its words, new words carry no make
// function, and a new assignment appends (+=). Anything else that differs
// is flagged. So a conditional wrapping the list from far above the
// hunk, a hunk inside a list of several lines whatever its header says,
// and a rule for tests/shtest.log are all seen.

// amModel is a makefile as the automake rule reads it.
type amModel struct {
	assigns  map[string][]amAssignment // by variable, in order
	rules    []amRuleDef
	includes []string // cond + line
	other    []string // cond + line
}

// amAssignment is one assignment of a variable.
type amAssignment struct {
	cond, op string
	words    []string
}

// amRuleDef is one rule: its targets and, as text, its conditionals,
// its line and its recipe.
type amRuleDef struct {
	targets []string
	text    string
}

// amLogical joins lines ending in a backslash with the lines they
// continue.
func amLogical(lines []string) []string {
	var out []string
	cur, open := "", false
	for _, l := range lines {
		if open {
			cur += " " + l
		} else {
			cur = l
		}
		open = strings.HasSuffix(strings.TrimRight(l, " \t"), "\\")
		if open {
			cur = strings.TrimSuffix(strings.TrimRight(cur, " \t"), "\\")
			continue
		}
		out = append(out, cur)
	}
	if open {
		out = append(out, cur)
	}
	return out
}

// readAmModel reads lines (a whole makefile) into its model.
func readAmModel(lines []string) amModel {
	m := amModel{assigns: map[string][]amAssignment{}}
	var conds []string
	var rule *amRuleDef
	var define *amAssignment
	defName := ""
	for _, l := range amLogical(lines) {
		if define != nil {
			if strings.TrimSpace(l) == "endef" {
				m.assigns[defName] = append(m.assigns[defName], *define)
				define = nil
				continue
			}
			define.words = append(define.words, strings.Fields(l)...)
			continue
		}
		if strings.HasPrefix(l, "\t") && rule != nil {
			rule.text += "\n" + strings.Join(conds, " && ") + "\t" + strings.TrimSpace(l)
			continue
		}
		body := strings.TrimSpace(l)
		if i := strings.Index(body, "#"); i >= 0 {
			body = strings.TrimSpace(body[:i])
		}
		cond := strings.Join(conds, " && ")
		if body == "" {
			continue
		}
		if c, ok := amCondition(body, &conds); ok {
			if !c {
				m.other = append(m.other, cond+"\x00"+body)
			}
			continue
		}
		m.flush(&rule)
		switch {
		case strings.HasPrefix(body, "define ") || strings.HasPrefix(body, "define\t"):
			defName = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(body, "define")), "="))
			define = &amAssignment{cond: cond, op: "define"}
		case amInclude().MatchString(body):
			m.includes = append(m.includes, cond+"\x00"+body)
		case amAssign().MatchString(body):
			a := amAssign().FindStringSubmatch(body)
			m.assigns[a[1]] = append(m.assigns[a[1]], amAssignment{cond: cond, op: a[2], words: amWords(a[3])})
		case amRule().MatchString(body):
			t := amRule().FindStringSubmatch(body)[1]
			rule = &amRuleDef{targets: strings.Fields(t), text: cond + "\x00" + body}
		default:
			m.other = append(m.other, cond+"\x00"+body)
		}
	}
	m.flush(&rule)
	return m
}

// flush ends the rule being read.
func (m *amModel) flush(rule **amRuleDef) {
	if *rule != nil {
		m.rules = append(m.rules, **rule)
		*rule = nil
	}
}

// amCondition steps conds over a conditional line (automake's if, else,
// endif; make's ifeq, ifneq, ifdef, ifndef): true when body is one;
// known is false for an else or endif without its if (a file that opens
// or closes a conditional of another file, which the model reads as a
// line of its own).
func amCondition(body string, conds *[]string) (known, ok bool) {
	word, rest, _ := strings.Cut(body, " ")
	rest = strings.TrimSpace(rest)
	switch word {
	case "if", "ifeq", "ifneq", "ifdef", "ifndef":
		*conds = append(*conds, word+" "+rest)
		return true, true
	case "else":
		if len(*conds) == 0 {
			return false, true
		}
		top := &(*conds)[len(*conds)-1]
		*top = "not(" + *top + ")"
		if rest != "" {
			*top += " and " + rest
		}
		return true, true
	case "endif":
		if len(*conds) == 0 {
			return false, true
		}
		*conds = (*conds)[:len(*conds)-1]
		return true, true
	}
	return false, false
}

// amVarRef names the variables a value refers to: $(NAME), ${NAME},
// $(NAME:.a=.b).
var amVarRef = lazyRegexp(`\$[({]([A-Za-z_][A-Za-z0-9_.]*)[:)}]`)

// testVars are the variables make check depends on in m (and n): the
// test variables and those their values name, transitively; grow are
// those of them a fix may add to: the growable lists and the variables
// only they name.
func testVars(models ...amModel) (strict, grow map[string]bool) {
	strict, grow = map[string]bool{}, map[string]bool{}
	for _, m := range models {
		for v := range m.assigns {
			if amGrowable[v] {
				grow[v] = true
			} else if amTestVar().MatchString(v) {
				strict[v] = true
			}
		}
	}
	closeOver(strict, models)
	closeOver(grow, models)
	for v := range strict {
		delete(grow, v)
	}
	return strict, grow
}

// closeOver adds to vars the variables their values name, in any model.
func closeOver(vars map[string]bool, models []amModel) {
	todo := make([]string, 0, len(vars))
	for v := range vars {
		todo = append(todo, v)
	}
	for len(todo) > 0 {
		v := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for _, m := range models {
			for _, a := range m.assigns[v] {
				for _, r := range amVarRef().FindAllStringSubmatch(strings.Join(a.words, " "), -1) {
					if !vars[r[1]] {
						vars[r[1]] = true
						todo = append(todo, r[1])
					}
				}
			}
		}
	}
}

// automakeFullFlags: the makefile's change, read whole (f), changes what
// make check runs or how, otherwise than by adding tests.
func automakeFullFlags(f Full) bool {
	old, cur := readAmModel(f.Old), readAmModel(f.New)
	strict, grow := testVars(old, cur)
	for v := range strict {
		if !slices.EqualFunc(old.assigns[v], cur.assigns[v], sameAssignment) {
			return true
		}
	}
	for v := range grow {
		if !grows(old.assigns[v], cur.assigns[v]) {
			return true
		}
	}
	tests := testWords(strict, grow, old, cur)
	if !sameSet(testRules(old, tests), testRules(cur, tests)) {
		return true
	}
	return !sameSet(old.includes, cur.includes) || !sameSet(old.other, cur.other)
}

func sameAssignment(a, b amAssignment) bool {
	return a.cond == b.cond && a.op == b.op && slices.Equal(a.words, b.words)
}

// grows: the assignments cur of a test list keep each of old's, in
// order, with its conditionals, operator and words, add words without
// make functions, and add only appending assignments (+=); a list the
// base file does not assign may be assigned any way without functions.
func grows(old, cur []amAssignment) bool {
	j := 0
	for _, o := range old {
		for j < len(cur) && !extends(o, cur[j]) {
			if len(old) > 0 && cur[j].op != "+=" || hasFunction(cur[j].words) {
				return false
			}
			j++
		}
		if j == len(cur) {
			return false
		}
		j++
	}
	for ; j < len(cur); j++ {
		if len(old) > 0 && cur[j].op != "+=" || hasFunction(cur[j].words) {
			return false
		}
	}
	return true
}

// extends: c is o with words added, none of them a make function.
func extends(o, c amAssignment) bool {
	if o.cond != c.cond || o.op != c.op {
		return false
	}
	have := map[string]int{}
	for _, w := range c.words {
		have[w]++
	}
	for _, w := range o.words {
		if have[w] == 0 {
			return false
		}
		have[w]--
	}
	var added []string
	for w, n := range have {
		if n > 0 {
			added = append(added, w)
		}
	}
	return !hasFunction(added)
}

func hasFunction(words []string) bool {
	return amFunction().MatchString(strings.Join(words, " "))
}

// testWords are the words of the test variables in either model: the
// tests, their programs and scripts.
func testWords(strict, grow map[string]bool, models ...amModel) map[string]bool {
	out := map[string]bool{}
	for _, m := range models {
		for v, as := range m.assigns {
			if !strict[v] && !grow[v] {
				continue
			}
			for _, a := range as {
				for _, w := range a.words {
					w = strings.TrimSuffix(w, "$(EXEEXT)")
					out[w], out[path.Base(w)] = true, true
				}
			}
		}
	}
	return out
}

// testRules are m's rules that make check depends on, as text: a target
// of make check's, a test (by a word of tests) or its log or result
// file, a pattern rule or a suffix rule.
func testRules(m amModel, tests map[string]bool) []string {
	var out []string
	for _, r := range m.rules {
		if slices.ContainsFunc(r.targets, func(t string) bool { return amTestRuleTarget(t, tests) }) {
			out = append(out, r.text)
		}
	}
	return out
}

// amTestRuleTarget: make check may build or run target t.
func amTestRuleTarget(t string, tests map[string]bool) bool {
	stem := strings.TrimSuffix(strings.TrimSuffix(t, ".log"), ".trs")
	switch {
	case amTestTarget().MatchString(t), tests[t], tests[stem], tests[strings.TrimSuffix(stem, "$(EXEEXT)")]:
		return true
	case strings.Contains(t, "%"):
		return true // a pattern rule can make any file, tests included
	case strings.HasPrefix(t, ".") && !strings.Contains(t, "/"):
		return true // a suffix rule (.sh.log:) or a special target
	}
	return tests[path.Base(stem)]
}

// automakeJudge: the changes of s (a makefile) touch make check's
// harness otherwise than by adding tests, read whole where the file is
// known (automakeFullFlags), else from the diff (automakeFlags).
// A base file the hunks do not apply to exactly (a patch meant for a
// fuzzy apply) is flagged: its hunks' context is not the file's.
func automakeJudge(s section) bool {
	if !configureReads(path.Base(s.file.Path())) && !makeRuns(s) {
		return false
	}
	if f, ok := s.full(); ok {
		return automakeFullFlags(f)
	}
	if _, known := s.in.base(s.file.OldPath); known && s.file.Op != patch.Added {
		return true
	}
	return automakeFlags(s)
}

// configureReads: automake or configure read the makefile named base
// (Makefile.am, any .am, Makefile.in), whatever runs the tests.
func configureReads(base string) bool {
	return base == "Makefile.in" || path.Ext(base) == ".am"
}

// makeRun is a test command word that runs make.
var makeRun = lazyRegexp(`(^|[\s;&|(])(g?make|make\.exe)(\s|$)`)

// makeRuns: the instance's test command runs make (or is not known): a
// plain makefile matters only then.
func makeRuns(s section) bool {
	return s.in.TestCommand == "" || makeRun().MatchString(s.in.TestCommand)
}

// isMakefile: a file named base is read by make or by automake's
// configure: Makefile.am (any .am), Makefile.in, a Makefile, make's
// GNUmakefile and makefile (which GNU make reads before Makefile), and
// .mk fragments an include names.
func isMakefile(base string) bool {
	switch base {
	case "Makefile", "GNUmakefile", "makefile", "Makefile.in":
		return true
	}
	return path.Ext(base) == ".am" || path.Ext(base) == ".mk"
}

// sameSet: a and b hold the same strings as many times each.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
