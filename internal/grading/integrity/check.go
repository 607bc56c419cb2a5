package integrity

import (
	"path"
	"strings"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/patch"
)

// Finding is one file of a model patch that a rule flags.
type Finding struct {
	Path   string
	Kind   Kind
	Reason string
}

// String is the Finding's reason as the report gives it.
func (f Finding) String() string { return f.Path + ": " + f.Reason }

// Result is Check's answer: the verdict and, when tampered, why.
type Result struct {
	Verdict  api.Integrity
	Findings []Finding
}

// Reasons are the findings' reasons, in patch order.
func (r Result) Reasons() []string {
	out := make([]string, len(r.Findings))
	for i, f := range r.Findings {
		out[i] = f.String()
	}
	return out
}

// testFileReason is the test-file rule's reason.
const testFileReason = "changes a file the test patch touches: the tests the task is graded by are the test patch's, not the model's"

// Check flags what modelPatch changes in the test machinery: any file
// testPatch touches, then each file by the first of Rules that matches it.
// A file testPatch touches is the task's to change and only the test-file
// rule applies to it. Either patch may be empty; nothing is run.
func Check(modelPatch, testPatch string) Result {
	return CheckInstance(modelPatch, Instance{TestPatch: testPatch})
}

// CheckInstance is Check with what else is known of the evaluation: the
// test command, and the repository's files at the base commit, which the
// rules that need more than the diff read whole (base.go).
func CheckInstance(modelPatch string, in Instance) Result {
	asked := map[string]bool{}
	for _, f := range patch.Files(in.TestPatch) {
		asked[f.OldPath], asked[f.NewPath] = true, true
	}
	delete(asked, "")
	res := Result{Verdict: api.IntegrityOK}
	for _, s := range sections(modelPatch) {
		s.in = in
		s.changed = wholeSettings(s)
		if f, ok := check(s, asked); ok {
			res.Findings = append(res.Findings, f)
		}
	}
	if len(res.Findings) > 0 {
		res.Verdict = api.IntegrityTampered
	}
	return res
}

// check applies the rules to one file of the model patch.
func check(s section, asked map[string]bool) (Finding, bool) {
	for _, p := range []string{s.file.OldPath, s.file.NewPath} {
		if asked[p] {
			return Finding{Path: p, Kind: KindTestFile, Reason: testFileReason}, true
		}
	}
	if p, ok := runsScript(s, s.in); ok {
		return Finding{Path: p, Kind: KindTestScript, Reason: testScriptReason}, true
	}
	for _, r := range Rules {
		for _, p := range s.paths() {
			if r.matches(p, s) {
				return Finding{Path: p, Kind: r.Kind, Reason: r.Reason}, true
			}
		}
	}
	return Finding{}, false
}

// matches: the rule flags path p of section s.
func (r Rule) matches(p string, s section) bool {
	added := p == s.file.NewPath && (s.file.Op == patch.Added || s.file.Op == patch.Renamed || s.file.Op == patch.Copied)
	if r.AddedOnly && !added {
		return false
	}
	named := r.Path != nil && r.Path(p, added)
	for _, b := range r.Base {
		if ok, _ := path.Match(b, path.Base(p)); ok {
			named = true
		}
	}
	if !named {
		return false
	}
	if r.Judge != nil && !s.file.Binary && (s.file.Op != patch.Deleted || r.JudgeDeleted) {
		return r.Judge(s)
	}
	if r.Lines == nil || s.file.Binary || s.file.Op == patch.Deleted || s.file.Op == patch.Added && len(s.changed) == 0 {
		return true
	}
	for _, l := range s.changed {
		if r.Lines().MatchString(l.text) || l.setting != "" && r.Lines().MatchString(l.setting) {
			return r.Allow == nil || !r.Allow(s.changed)
		}
	}
	return false
}

// section is one file's part of a diff: the file and its changed lines.
type section struct {
	file    patch.File
	changed []changedLine
	raw     string   // the file's part of the diff
	in      Instance // what else the check knows
}

// full is s's file whole (fullFile), when it can be known.
func (s section) full() (Full, bool) { return fullFile(s, s.in) }

// changedLine is a line a hunk adds or removes, without its +/-, and for
// an indented continuation line, the setting line above it that it
// continues (an ini value over several lines, a toml array; for the first
// lines of a hunk, the line its header names). Lines of one
// run have no unchanged line between them: its added lines are adjacent
// in the new file.
type changedLine struct {
	text, setting string
	table         string // the [table] header above it (TOML, ini), "" if none is known
	removed       bool
	run           int
}

// paths are the section's paths, the new one first.
func (s section) paths() []string {
	var out []string
	for _, p := range []string{s.file.NewPath, s.file.OldPath} {
		if p != "" && (len(out) == 0 || out[0] != p) {
			out = append(out, p)
		}
	}
	return out
}

// sections splits a diff into its files (patch.Files reads each part's
// header) with their changed lines. A diff without git headers is split
// at its "--- "/"+++ " pairs outside hunks.
func sections(diff string) []section {
	var out []section
	for _, part := range split(diff) {
		files := patch.Files(part)
		if len(files) == 0 {
			continue
		}
		out = append(out, section{file: files[0], changed: changedLines(part), raw: part})
	}
	return out
}

// split cuts a diff before each file header.
func split(diff string) []string {
	lines := strings.SplitAfter(diff, "\n")
	git := strings.HasPrefix(diff, "diff --git ") || strings.Contains(diff, "\ndiff --git ")
	var parts []string
	start, inHunk := 0, false
	for i, l := range lines {
		header := false
		switch {
		case git:
			header = strings.HasPrefix(l, "diff --git ")
		case strings.HasPrefix(l, "@@ "):
			inHunk = true
		case strings.HasPrefix(l, "--- ") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "+++ "):
			// A removed line "-- x" followed by an added "++ y" looks the
			// same; patch.Files counts hunks, a split in the wrong place
			// only costs that file's changed lines their header.
			header = !inHunk || !strings.HasPrefix(lines[i-1], "-")
			inHunk = false
		}
		if header && i > start {
			parts = append(parts, strings.Join(lines[start:i], ""))
			start = i
		}
	}
	return append(parts, strings.Join(lines[start:], ""))
}

// changedLines are the lines the hunks of one file's diff add or remove.
func changedLines(part string) []changedLine {
	var out []changedLine
	inHunk, setting, table, run := false, "", "", 0
	for _, l := range strings.Split(part, "\n") {
		l = strings.TrimSuffix(l, "\r")
		if strings.HasPrefix(l, "@@") {
			// the text after the header's second @@ is the line git's
			// funcname finds above the hunk: for an ini or toml file, the
			// setting an indented first line continues
			inHunk, setting, table = true, "", ""
			if i := strings.Index(l[2:], "@@"); i >= 0 {
				setting = strings.TrimSpace(l[2+i+2:])
			}
			if isTableHeader(setting) {
				table = setting
			}
			run++
			continue
		}
		if !inHunk || l == "" || l[0] != ' ' && l[0] != '+' && l[0] != '-' {
			continue
		}
		text := l[1:]
		continuation := strings.HasPrefix(text, " ") || strings.HasPrefix(text, "\t")
		if !continuation && strings.TrimSpace(text) != "" {
			setting = text
		}
		if isTableHeader(text) {
			table = text
		}
		if l[0] == ' ' {
			run++
			continue
		}
		c := changedLine{text: text, table: table, removed: l[0] == '-', run: run}
		if continuation {
			c.setting = setting
		}
		out = append(out, c)
	}
	return out
}
