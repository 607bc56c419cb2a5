package patch

import (
	"strconv"
	"strings"
)

// Op says what a diff does to a file.
type Op string

// The operations on a file.
const (
	Modified Op = "modified"
	Added    Op = "added"
	Deleted  Op = "deleted"
	Renamed  Op = "renamed"
	Copied   Op = "copied"
)

// File is one file a diff touches. Paths are relative, without git's "a/"
// and "b/" prefixes. OldPath is empty for an added file, NewPath for a
// deleted one.
type File struct {
	OldPath string
	NewPath string
	Op      Op
	Binary  bool
}

// Path returns the path the file has after the diff, or before it for a
// deleted file.
func (f File) Path() string {
	if f.NewPath != "" {
		return f.NewPath
	}
	return f.OldPath
}

// Files lists the files a diff touches, in order, each once.
func Files(diff string) []File {
	var files []File
	var cur *File
	inHunk := false
	hunkOld, hunkNew := 0, 0 // lines left in the current hunk
	flush := func() {
		if cur != nil && (cur.OldPath != "" || cur.NewPath != "") {
			files = append(files, *cur)
		}
		cur = nil
	}
	lines := strings.Split(diff, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSuffix(lines[i], "\r")
		if inHunk {
			if hunkOld > 0 || hunkNew > 0 {
				switch {
				case strings.HasPrefix(line, "-"):
					hunkOld--
					continue
				case strings.HasPrefix(line, "+"):
					hunkNew--
					continue
				case strings.HasPrefix(line, " ") || line == "":
					hunkOld--
					hunkNew--
					continue
				case strings.HasPrefix(line, `\`): // "\ No newline at end of file"
					continue
				}
			}
			if strings.HasPrefix(line, `\`) {
				continue
			}
			inHunk = false
		}
		switch {
		case strings.HasPrefix(line, "diff --git "):
			flush()
			old, new, ok := splitGitHeader(line[len("diff --git "):])
			cur = &File{Op: Modified}
			if ok {
				cur.OldPath, cur.NewPath = old, new
			}
		case strings.HasPrefix(line, "--- ") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "+++ "):
			old := headerPath(line[4:])
			new := headerPath(strings.TrimSuffix(lines[i+1], "\r")[4:])
			i++
			if cur == nil || (cur.OldPath == "" && cur.NewPath == "" && cur.Op == Modified) {
				flush()
				cur = &File{Op: Modified}
			}
			if cur.Op != Renamed && cur.Op != Copied {
				cur.OldPath, cur.NewPath = old, new
			}
			if old == "" && new != "" {
				cur.Op = Added
			} else if new == "" && old != "" {
				cur.Op = Deleted
			}
		case strings.HasPrefix(line, "@@ "):
			o, n, ok := hunkCounts(line)
			if ok {
				inHunk, hunkOld, hunkNew = true, o, n
			}
		case cur == nil:
			// text before the first header: a commit message, say
		case strings.HasPrefix(line, "new file mode "):
			cur.Op, cur.OldPath = Added, ""
		case strings.HasPrefix(line, "deleted file mode "):
			cur.Op, cur.NewPath = Deleted, ""
		case strings.HasPrefix(line, "rename from "):
			cur.Op, cur.OldPath = Renamed, unquote(line[len("rename from "):])
		case strings.HasPrefix(line, "rename to "):
			cur.Op, cur.NewPath = Renamed, unquote(line[len("rename to "):])
		case strings.HasPrefix(line, "copy from "):
			cur.Op, cur.OldPath = Copied, unquote(line[len("copy from "):])
		case strings.HasPrefix(line, "copy to "):
			cur.Op, cur.NewPath = Copied, unquote(line[len("copy to "):])
		case strings.HasPrefix(line, "Binary files ") || line == "GIT binary patch":
			cur.Binary = true
		}
	}
	flush()
	return dedupe(files)
}

// Paths returns the path of every file the diff touches (Path of each File).
func Paths(diff string) []string {
	files := Files(diff)
	out := make([]string, 0, len(files))
	for _, f := range files {
		out = append(out, f.Path())
	}
	return out
}

func dedupe(files []File) []File {
	seen := map[File]bool{}
	out := files[:0]
	for _, f := range files {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

// splitGitHeader splits `a/old b/new` (either side possibly quoted). When
// the names are unquoted and contain spaces the split is ambiguous; git
// then writes old and new equal, which is what this looks for first.
func splitGitHeader(s string) (old, new string, ok bool) {
	if strings.HasPrefix(s, `"`) {
		q, rest, ok := cutQuoted(s)
		if !ok {
			return "", "", false
		}
		rest = strings.TrimPrefix(rest, " ")
		return stripPrefix(q), stripPrefix(unquote(rest)), true
	}
	if i := strings.Index(s, ` "`); i >= 0 && strings.HasSuffix(s, `"`) {
		return stripPrefix(s[:i]), stripPrefix(unquote(s[i+1:])), true
	}
	// Same name on both sides: "a/<p> b/<p>".
	if len(s)%2 == 1 {
		half := (len(s) - 1) / 2
		if s[half] == ' ' && strings.HasPrefix(s, "a/") && strings.HasPrefix(s[half+1:], "b/") && s[2:half] == s[half+3:] {
			return s[2:half], s[half+3:], true
		}
	}
	i := strings.LastIndex(s, " b/")
	if i < 0 {
		i = strings.LastIndex(s, " ")
		if i < 0 {
			return "", "", false
		}
	}
	return stripPrefix(s[:i]), stripPrefix(s[i+1:]), true
}

// headerPath reads the path of a ---/+++ line: "/dev/null" is "", a
// trailing tab and timestamp are dropped, git's a/ b/ prefix removed.
func headerPath(s string) string {
	if strings.HasPrefix(s, `"`) {
		s = unquote(s)
	} else if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimRight(s, " ")
	if s == "/dev/null" {
		return ""
	}
	return stripPrefix(s)
}

func stripPrefix(p string) string {
	if strings.HasPrefix(p, "a/") || strings.HasPrefix(p, "b/") {
		return p[2:]
	}
	return p
}

// unquote reads git's C-style quoted path; an unquoted path is returned as is.
func unquote(s string) string {
	if !strings.HasPrefix(s, `"`) {
		return s
	}
	q, _, ok := cutQuoted(s)
	if !ok {
		return s
	}
	return q
}

// cutQuoted reads one quoted string at the start of s.
func cutQuoted(s string) (string, string, bool) {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			v, err := strconv.Unquote(s[:i+1])
			if err != nil {
				v = unescapeOctal(s[1:i])
			}
			return v, s[i+1:], true
		}
	}
	return "", s, false
}

// unescapeOctal handles the escapes git writes (\ooo, \t, \n, \", \\) where
// strconv.Unquote does not accept the string.
func unescapeOctal(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; {
		case e >= '0' && e <= '7' && i+2 < len(s):
			if v, err := strconv.ParseUint(s[i:i+3], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
			} else {
				b.WriteByte(e)
			}
		case e == 't':
			b.WriteByte('\t')
		case e == 'n':
			b.WriteByte('\n')
		default:
			b.WriteByte(e)
		}
	}
	return b.String()
}

// hunkCounts reads the line counts of "@@ -a,b +c,d @@" (a count omitted is 1).
func hunkCounts(line string) (old, new int, ok bool) {
	f := strings.Fields(line)
	if len(f) < 3 || !strings.HasPrefix(f[1], "-") || !strings.HasPrefix(f[2], "+") {
		return 0, 0, false
	}
	count := func(r string) (int, bool) {
		_, c, found := strings.Cut(r[1:], ",")
		if !found {
			return 1, true
		}
		n, err := strconv.Atoi(c)
		return n, err == nil && n >= 0 && n < 1<<30
	}
	o, ok1 := count(f[1])
	n, ok2 := count(f[2])
	return o, n, ok1 && ok2
}

// GitHeaderPaths is the harness's re.findall(r"diff --git a/.* b/(.*)",
// patch): for each line containing "diff --git a/", the text after the
// last " b/" that follows it.
func GitHeaderPaths(diff string) []string {
	var out []string
	for _, line := range strings.Split(diff, "\n") {
		i := strings.Index(line, "diff --git a/")
		if i < 0 {
			continue
		}
		rest := line[i+len("diff --git a/"):]
		j := strings.LastIndex(rest, " b/")
		if j < 0 {
			continue
		}
		out = append(out, rest[j+len(" b/"):])
	}
	return out
}

// MinusPaths is the harness's re.findall(r"--- a/(.*)", patch): for each
// line containing "--- a/", the rest of the line after its first
// occurrence. (It matches inside hunks too, as the harness does.)
func MinusPaths(diff string) []string {
	var out []string
	for _, line := range strings.Split(diff, "\n") {
		if _, after, found := strings.Cut(line, "--- a/"); found {
			out = append(out, after)
		}
	}
	return out
}
