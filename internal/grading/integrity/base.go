package integrity

import (
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/minisandbox/msb/internal/patch"
)

// What a diff alone does not say. A hunk shows a few lines around each
// change, and git's hunk header names a line above it that the patch
// writes itself: a rule that reads only the diff must trust both. Where
// the evaluation has the repository at its base commit, the rules that
// need more read the whole file instead (Instance.Base): the patch's
// hunks are applied to the base file, and the file before and after is
// compared (Full). A file the patch creates is whole in the diff already.
// And the test command names the scripts the harness runs
// (Instance.TestCommand): a script it runs is the harness itself.

// Instance is what the static check knows of the evaluation beside the
// model patch.
type Instance struct {
	// TestPatch is the instance's test patch: what the task asks to change.
	TestPatch string
	// TestCommand is the command (or the eval script's lines) the harness
	// runs the tests with; empty when unknown.
	TestCommand string
	// Base reads a file of the repository at the base commit by its path
	// in the repository; nil, or false for a file, when it is not known
	// (msb integrity check reads patches only). BasePaths says which
	// files the rules read.
	Base func(path string) (string, bool)
}

// base is in's file p at the base commit.
func (in Instance) base(p string) (string, bool) {
	if in.Base == nil || p == "" {
		return "", false
	}
	return in.Base(p)
}

// BasePaths are the files of the repository at the base commit that the
// rules read for modelPatch (Instance.Base): the files it changes that a
// rule reads whole (Makefile.am and the other makefiles, build.rs, Cargo
// configuration, JSON and YAML files), and the Jest configuration files
// that may name a tsconfig. An evaluation reads them before it applies
// the patch.
func BasePaths(modelPatch string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, f := range patch.Files(modelPatch) {
		if f.Op == patch.Added || !readsWhole(f.OldPath) {
			continue
		}
		add(f.OldPath)
	}
	for _, p := range jestConfigNames {
		add(p)
	}
	return out
}

// readsWhole: a rule reads file p whole when the evaluation has it.
func readsWhole(p string) bool {
	base := path.Base(p)
	switch {
	case isMakefile(base), isBuildScript(p, false), isCargoConfig(p, false):
		return true
	}
	switch path.Ext(base) {
	case ".json", ".jsonc", ".json5", ".yml", ".yaml", ".toml":
		return true
	}
	return false
}

// Full is one file of the model patch whole: its lines at the base commit
// and after the patch, and which of them the patch removes and adds.
type Full struct {
	Old, New       []string
	Removed, Added map[int]bool // indices into Old, New
	// Changed are the diff's changed lines in its order: an index into
	// Old for a removed line, into New for an added one.
	Changed []int
}

// fullFile is section s's file whole, from in's base file (a file the
// patch creates needs none, one it deletes has no new side); false when
// the base is unknown or the hunks do not apply to it.
func fullFile(s section, in Instance) (Full, bool) {
	switch {
	case s.file.Binary:
		return Full{}, false
	case s.file.Op == patch.Added:
		return applyHunks(nil, s.raw)
	}
	text, ok := in.base(s.file.OldPath)
	if !ok {
		return Full{}, false
	}
	return applyHunks(fileLines(text), s.raw)
}

// fileLines are text's lines, without their line ends.
func fileLines(text string) []string {
	if text == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// hunkHeader reads "@@ -a,b +c,d @@".
var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// hunk is one hunk of a diff: where it says it starts in the old file, and
// its lines with their ' ', '-' or '+'.
type hunk struct {
	oldStart int
	lines    []string
}

// hunks are the hunks of one file's part of a diff, each as long as its
// header's counts say (an empty line inside is an empty context line,
// as patch reads it; what follows the counted lines is not the hunk's).
func hunks(raw string) []hunk {
	var out []hunk
	oldLeft, newLeft := 0, 0
	for _, l := range strings.Split(raw, "\n") {
		l = strings.TrimSuffix(l, "\r")
		if m := hunkHeader.FindStringSubmatch(l); m != nil {
			start, _ := strconv.Atoi(m[1])
			oldLeft, newLeft = count(m[2]), count(m[4])
			out = append(out, hunk{oldStart: start})
			continue
		}
		if len(out) == 0 || oldLeft <= 0 && newLeft <= 0 {
			continue
		}
		if l == "" {
			l = " "
		}
		switch l[0] {
		case ' ':
			oldLeft--
			newLeft--
		case '-':
			oldLeft--
		case '+':
			newLeft--
		default:
			continue
		}
		h := &out[len(out)-1]
		h.lines = append(h.lines, l)
	}
	return out
}

// count is a hunk header's line count (1 when it gives none).
func count(s string) int {
	if s == "" {
		return 1
	}
	n, _ := strconv.Atoi(s)
	return n
}

// oldSide are the lines of h the old file has (context and removed).
func (h hunk) oldSide() []string {
	var out []string
	for _, l := range h.lines {
		if l[0] != '+' {
			out = append(out, l[1:])
		}
	}
	return out
}

// applyHunks applies the hunks of raw to old as patch does: each hunk
// where its header says or, failing that, at the nearest place after the
// previous hunk where its old lines are; false when one is nowhere.
func applyHunks(old []string, raw string) (Full, bool) {
	f := Full{Old: old, Removed: map[int]bool{}, Added: map[int]bool{}}
	at := 0
	for _, h := range hunks(raw) {
		want := h.oldSide()
		pos, ok := findLines(old, want, at, h.oldStart-1)
		if len(want) == 0 {
			// a hunk that only adds: after line oldStart
			pos, ok = max(h.oldStart, at), h.oldStart <= len(old)
		}
		if !ok {
			return Full{}, false
		}
		f.New = append(f.New, old[at:pos]...)
		at = pos
		for _, l := range h.lines {
			switch l[0] {
			case ' ':
				f.New = append(f.New, old[at])
				at++
			case '-':
				f.Removed[at] = true
				f.Changed = append(f.Changed, at)
				at++
			case '+':
				f.Added[len(f.New)] = true
				f.Changed = append(f.Changed, len(f.New))
				f.New = append(f.New, strings.TrimSuffix(l[1:], "\r"))
			}
		}
	}
	f.New = append(f.New, old[at:]...)
	return f, true
}

// findLines is the index of old, at from or after, nearest to hint, where
// the lines want start.
func findLines(old, want []string, from, hint int) (int, bool) {
	best := -1
	for i := from; i+len(want) <= len(old); i++ {
		if !linesAt(old, want, i) {
			continue
		}
		if best < 0 || abs(i-hint) < abs(best-hint) {
			best = i
		}
	}
	return best, best >= 0
}

func linesAt(old, want []string, i int) bool {
	for j, w := range want {
		if old[i+j] != strings.TrimSuffix(w, "\r") {
			return false
		}
	}
	return true
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// wholeSettings gives each of s's changed lines the setting it continues
// as the whole file says (settingLines), instead of the hunk's context and
// header; s's changed lines as they are when the file is not known whole.
func wholeSettings(s section) []changedLine {
	f, ok := s.full()
	if !ok || len(f.Changed) != len(s.changed) {
		return s.changed
	}
	toml := path.Ext(s.file.NewPath) == ".toml" || isCargoConfig(s.file.NewPath, false)
	oldSet, newSet := settingLines(f.Old, toml), settingLines(f.New, toml)
	oldTable, newTable := tableLines(f.Old), tableLines(f.New)
	out := make([]changedLine, len(s.changed))
	for i, c := range s.changed {
		if c.removed {
			c.setting, c.table = oldSet[f.Changed[i]], oldTable[f.Changed[i]]
		} else {
			c.setting, c.table = newSet[f.Changed[i]], newTable[f.Changed[i]]
		}
		out[i] = c
	}
	return out
}

// isTableHeader: line l is a TOML or ini table header ([name], [[name]]).
func isTableHeader(l string) bool {
	t := strings.TrimSpace(l)
	return strings.HasPrefix(t, "[") && !strings.Contains(t, "=")
}

// tableLines are, for each line, the table header it is under (the line
// itself for a header), "" above the first.
func tableLines(lines []string) []string {
	out := make([]string, len(lines))
	table := ""
	for i, l := range lines {
		if isTableHeader(l) && !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "\t") {
			table = l
		}
		out[i] = table
	}
	return out
}

// settingLines are, for each line, the setting line it continues: for an
// indented line, the last line above it that is not indented; in TOML,
// also any line inside an array or inline table, which continues the line
// that opened it, indented or not. "" for a line that continues nothing.
func settingLines(lines []string, toml bool) []string {
	out := make([]string, len(lines))
	setting, opener, depth := "", "", 0
	for i, l := range lines {
		indented := strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")
		switch {
		case depth > 0:
			out[i] = opener
		case indented:
			out[i] = setting
		case strings.TrimSpace(l) != "":
			setting = l
		}
		if !toml {
			continue
		}
		d := tomlDepth(l)
		if depth == 0 && depth+d > 0 {
			opener = l
		}
		depth = max(depth+d, 0)
	}
	return out
}

// tomlDepth is how many arrays and inline tables line l opens (less
// those it closes), outside strings and comments; a table header
// ([section], [[array]]) opens none.
func tomlDepth(l string) int {
	t := strings.TrimSpace(l)
	if strings.HasPrefix(t, "[") && !strings.Contains(t, "=") {
		return 0
	}
	d := 0
	var quote byte
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#':
			return d
		case c == '[' || c == '{':
			d++
		case c == ']' || c == '}':
			d--
		}
	}
	return d
}
