package patch

import (
	"regexp"
	"strings"
)

var hunkHeader = regexp.MustCompile(`^@@ -(\d+(?:,\d+)?) \+(\d+(?:,\d+)?) @@(.*)$`)

// Reverse returns the diff that undoes diff: old and new sides swapped in
// file headers, hunk headers and hunk lines, creations become deletions and
// renames run backwards. SWE-smith's gold patch introduces the bug; its
// reverse is the fix.
func Reverse(diff string) string {
	lines := strings.SplitAfter(diff, "\n")
	out := make([]string, 0, len(lines))
	inHunk := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		body := strings.TrimRight(l, "\n")
		eol := l[len(body):]
		switch {
		case strings.HasPrefix(body, "diff --git "):
			inHunk = false
			if a, b, ok := splitGitHeader(body[len("diff --git "):]); ok {
				body = "diff --git a/" + b + " b/" + a
			}
		case !inHunk && strings.HasPrefix(body, "--- ") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "+++ "):
			next := strings.TrimRight(lines[i+1], "\n")
			out = append(out, "--- "+swapPrefix(next[4:], "b/", "a/")+eol, "+++ "+swapPrefix(body[4:], "a/", "b/")+lines[i+1][len(next):])
			i++
			continue
		case strings.HasPrefix(body, "@@ "):
			inHunk = true
			if m := hunkHeader.FindStringSubmatch(body); m != nil {
				body = "@@ -" + m[2] + " +" + m[1] + " @@" + m[3]
			}
		case inHunk && strings.HasPrefix(body, "+"):
			body = "-" + body[1:]
		case inHunk && strings.HasPrefix(body, "-"):
			body = "+" + body[1:]
		case strings.HasPrefix(body, "new file mode "):
			body = "deleted file mode " + body[len("new file mode "):]
		case strings.HasPrefix(body, "deleted file mode "):
			body = "new file mode " + body[len("deleted file mode "):]
		case strings.HasPrefix(body, "rename from "):
			body = "rename to " + body[len("rename from "):]
		case strings.HasPrefix(body, "rename to "):
			body = "rename from " + body[len("rename to "):]
		case strings.HasPrefix(body, "index "):
			if from, to, ok := strings.Cut(strings.Fields(body[len("index "):])[0], ".."); ok {
				rest := strings.TrimPrefix(body[len("index "):], from+".."+to)
				body = "index " + to + ".." + from + rest
			}
		case !strings.HasPrefix(body, " ") && !strings.HasPrefix(body, `\`):
			inHunk = false
		}
		out = append(out, body+eol)
	}
	return strings.Join(out, "")
}

func swapPrefix(p, from, to string) string {
	if strings.HasPrefix(p, from) {
		return to + p[len(from):]
	}
	return p
}
