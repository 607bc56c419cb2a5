package integrity

import (
	"regexp"
	"slices"
	"strings"
)

// A Cargo build script runs before the crate and its tests compile, with
// the rights of the test command: besides what it tells rustc
// (buildScriptLines), it can rewrite the tests' sources or run a program
// that does. Cargo gives it OUT_DIR for what it generates; ripgrep's gold
// fix (BurntSushi__ripgrep-2626) runs `git rev-parse` to embed the
// revision. So a build.rs the patch changes is flagged when a line of it
// writes the file system (fs::write, File::create, OpenOptions, copy,
// rename, remove ...) at a path not built from OUT_DIR alone, or runs a
// program other than git with literal read-only arguments, or renames
// the APIs that do (use ... as), which would hide them from these
// patterns. Where the base file is known the whole script as the patch
// leaves it is read (an added call of an existing function that writes
// where its argument says is then seen); else the lines the patch adds.

// rsWrite is a call that creates, writes, moves or removes a file.
var rsWrite = lazyRegexp(`\b(fs\s*::\s*(write|copy|rename|hard_link|soft_link|remove_file|remove_dir|remove_dir_all|create_dir|create_dir_all|set_permissions)|File\s*::\s*(create|create_new|options)|OpenOptions\b|symlink(_file|_dir)?\s*\(|\.(out_dir|write_to_file)\s*\()`)

// rsSpawn is a call that runs a program, or changes how one runs.
var rsSpawn = lazyRegexp(`\bCommand\s*::\s*new\b|\blibc\s*::\s*(system|exec\w*|fork|popen)\b|\bCommandExt\b|\.(envs?|env_clear|pre_exec)\s*\(`)

// rsRename is a use declaration that renames or globs what rsWrite and
// rsSpawn name, or a module they live in, or a type alias of them.
var rsRename = lazyRegexp(`\buse\b[^;]*\b(fs|process|File|OpenOptions|Command|libc)\b[^;]*(\bas\b|\*)|\btype\s+\w+\s*=[^;]*\b(Command|File|OpenOptions)\b`)

// rsFsImport is what a use declaration imports from a module fs.
var rsFsImport = lazyRegexp(`\bfs\s*::\s*(\{[^}]*\}?|\w+)`)

// rsAlias: line code renames what rsWrite and rsSpawn name (rsRename)
// or imports a function of fs (write(...) would then name none of them).
func rsAlias(code string) bool {
	if rsRename().MatchString(code) {
		return true
	}
	if !strings.HasPrefix(strings.TrimSpace(code), "use ") {
		return false
	}
	for _, m := range rsFsImport().FindAllStringSubmatch(code, -1) {
		for _, id := range strings.FieldsFunc(m[1], func(r rune) bool { return strings.ContainsRune("{}, ", r) }) {
			if id != "self" && id[0] >= 'a' && id[0] <= 'z' {
				return true
			}
		}
	}
	return false
}

// rsOutDir is OUT_DIR, as Cargo gives it.
var rsOutDir = `(?:std::)?env::var(?:_os)?\("OUT_DIR"\)|env!\("OUT_DIR"\)`

// rsLet binds a name to an expression.
var rsLet = lazyRegexp(`\blet\s+(?:mut\s+)?([A-Za-z_]\w*)\s*(?::[^=]+)?=\s*(.+?);?\s*$`)

// buildScriptFlags: a line of s (a build.rs; the lines it adds, or the
// whole script as it leaves it where the base is known) writes outside
// OUT_DIR or runs a program (the comment above).
func buildScriptFlags(s section) bool {
	lines := addedLines(s)
	text := slices.Concat(lines, contextLines(s.raw)) // where names are bound
	if f, ok := s.full(); ok {
		text, lines = f.New, f.New
	}
	out := outDirNames(text)
	for _, l := range lines {
		code := rsCode(l)
		if strings.HasPrefix(strings.TrimSpace(code), "use ") {
			if rsAlias(code) {
				return true
			}
			continue
		}
		switch {
		case rsAlias(code):
			return true
		case rsSpawn().MatchString(code) && !gitReadOnly(code, text):
			return true
		case rsWrite().MatchString(code) && !writesUnder(code, out):
			return true
		}
	}
	return false
}

// addedLines are the lines s adds.
func addedLines(s section) []string {
	var out []string
	for _, c := range s.changed {
		if !c.removed {
			out = append(out, c.text)
		}
	}
	return out
}

// rsCode is a line of Rust without its // comment.
func rsCode(l string) string {
	if i := strings.Index(l, "//"); i >= 0 && !strings.Contains(l[:i], `"`) {
		return l[:i]
	}
	return l
}

// contextLines are the unchanged lines of a diff's hunks.
func contextLines(raw string) []string {
	var out []string
	for _, h := range hunks(raw) {
		for _, l := range h.lines {
			if l[0] == ' ' {
				out = append(out, l[1:])
			}
		}
	}
	return out
}

// outDirNames are the names text binds, with let, to OUT_DIR or to a
// path under it: OUT_DIR itself, Path::new or PathBuf::from of such a
// name, or such a name joined with relative literals (outDirPath). A name
// that text binds anywhere to anything else (a second let, a pattern, a
// parameter) is not one: which binding a use sees is not read.
func outDirNames(text []string) map[string]bool {
	lets := map[string][]string{}
	for _, l := range text {
		if m := rsLet().FindStringSubmatch(rsCode(l)); m != nil {
			lets[m[1]] = append(lets[m[1]], m[2])
		}
	}
	names := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for name, exprs := range lets {
			if names[name] || rebinds(text, name) {
				continue
			}
			all := true
			for _, e := range exprs {
				all = all && outDirPath(e, names)
			}
			if all {
				names[name], changed = true, true
			}
		}
	}
	return names
}

// rebinds: text binds name otherwise than by a plain let: in a pattern
// (let Some(name), if let, while let, a match arm, for ... in), as a
// closure's or a function's parameter.
func rebinds(text []string, name string) bool {
	n := regexp.QuoteMeta(name)
	re := regexp.MustCompile(`\blet\s*[(\[{A-Z&].*\b` + n + `\b.*=|\b(if|while)\s+let\b.*\b` + n + `\b|\bfor\b.*\b` + n + `\b.*\bin\b|\|[^|]*\b` + n + `\b[^|]*\||\bfn\s+\w+.*\(.*\b` + n + `\s*:|\b` + n + `\b[^=]*=>|\b` + n + `\s*@`)
	for _, l := range text {
		if re.MatchString(rsCode(l)) {
			return true
		}
	}
	return false
}

// outDirPath: expression e is OUT_DIR, or a path under it: a name of
// names (or OUT_DIR itself) wrapped in Path::new, PathBuf::from, & or
// .as_ref(), then only joined with literals that are relative and do not
// climb (no "..", no leading /).
func outDirPath(e string, names map[string]bool) bool {
	e = strings.Join(strings.Fields(e), "")
	e = strings.TrimSuffix(e, ";")
	root := regexp.MustCompile(`^(?:&|(?:std::)?path::|Path::new\(|PathBuf::from\()*(` + rsOutDir + `|[A-Za-z_]\w*)`)
	m := root.FindStringSubmatch(e)
	if m == nil || !strings.Contains(m[1], "OUT_DIR") && !names[m[1]] {
		return false
	}
	rest := e[len(m[0]):]
	step := regexp.MustCompile(`^(?:\)|\.unwrap\(\)|\.expect\("[^"]*"\)|\?|\.as_ref\(\)|\.to_path_buf\(\)|\.clone\(\)|\.join\("([^"]*)"\))`)
	for rest != "" {
		s := step.FindStringSubmatch(rest)
		if s == nil {
			return false
		}
		if strings.HasPrefix(s[1], "/") || strings.Contains(s[1], "..") {
			return false
		}
		rest = rest[len(s[0]):]
	}
	return true
}

// writesUnder: each file-system call of line code writes at a path under
// OUT_DIR: its first argument is one (outDirPath).
func writesUnder(code string, out map[string]bool) bool {
	for _, loc := range rsWrite().FindAllStringIndex(code, -1) {
		arg, ok := firstArg(code[loc[1]:])
		if !ok || !outDirPath(arg, out) {
			return false
		}
	}
	return true
}

// firstArg is the first argument of the call whose name rest follows
// (from the opening parenthesis on); false when the line does not hold
// it (OpenOptions's builder, a call over several lines).
func firstArg(rest string) (string, bool) {
	rest = strings.TrimLeft(rest, " ")
	if !strings.HasPrefix(rest, "(") {
		return "", false
	}
	depth := 0
	for i, c := range rest {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return rest[1:i], true
			}
		case ',':
			if depth == 1 {
				return rest[1:i], true
			}
		}
	}
	return "", false
}

// gitReadOnly: the program line code runs is git, with literal arguments
// (on the line, or an array of literals bound by let in text) whose first
// is a command that only reads the repository and none of which names an
// output file.
func gitReadOnly(code string, text []string) bool {
	m := regexp.MustCompile(`Command\s*::\s*new\(\s*"git"\s*\)((?:\s*\.(?:arg|args)\([^)]*\))*)`).FindStringSubmatch(code)
	if m == nil || strings.Count(code, "Command") != 1 {
		return false
	}
	var args []string
	for _, call := range regexp.MustCompile(`\.(arg|args)\(([^)]*)\)`).FindAllStringSubmatch(m[1], -1) {
		a, ok := literalArgs(call[2], text)
		if !ok {
			return false
		}
		args = append(args, a...)
	}
	if len(args) == 0 || !gitReadCommands[args[0]] {
		return false
	}
	for _, a := range args {
		if strings.HasPrefix(a, "--output") || strings.HasPrefix(a, "-o") || strings.HasPrefix(a, "-c") || strings.HasPrefix(a, "--exec") {
			return false
		}
	}
	return true
}

// gitReadCommands only read the repository.
var gitReadCommands = map[string]bool{"rev-parse": true, "describe": true, "rev-list": true, "show-ref": true, "ls-files": true}

// literalArgs are the string literals of argument list e: literals, an
// array of them, or a name text binds (let) to such an array; false for
// anything else.
func literalArgs(e string, text []string) ([]string, bool) {
	e = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(e), "&"))
	if name := regexp.MustCompile(`^[A-Za-z_]\w*$`).FindString(e); name != "" {
		bound := ""
		for _, l := range text {
			if m := rsLet().FindStringSubmatch(rsCode(l)); m != nil && m[1] == name {
				if bound != "" {
					return nil, false // bound twice: which one is not read
				}
				bound = m[2]
			}
		}
		if bound == "" {
			return nil, false
		}
		e = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(bound), "&"))
	}
	e = strings.TrimSuffix(strings.TrimPrefix(e, "["), "]")
	var out []string
	for _, part := range strings.Split(e, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if len(part) < 2 || part[0] != '"' || part[len(part)-1] != '"' || strings.ContainsAny(part[1:len(part)-1], `"\`) {
			return nil, false
		}
		out = append(out, part[1:len(part)-1])
	}
	return out, true
}
