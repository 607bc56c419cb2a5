package integrity

import (
	"path"
	"strings"
)

// The test command is the harness's and the same for every patch, but a
// script it runs from the repository (sympy's bin/test, django's
// tests/runtests.py, a ci/test.sh that exports RUSTFLAGS or CARGO_*
// before cargo test) is a file a patch can change: changing it changes
// how every test runs, so the test_script rule flags any change of a
// file the test command names, as the test-file rule does for the test
// patch's files.

// testScriptReason is the test-script rule's reason.
const testScriptReason = "changes a script the test command runs: the harness runs the tests through it (its environment, such as RUSTFLAGS or CARGO_*, its selection, its exit status)"

// commandScripts are the repository's files command names: its words that
// are paths (relative, ./ or under the repository's directory) of a
// script or a program, without options and shell operators.
func commandScripts(command string) map[string]bool {
	out := map[string]bool{}
	words := strings.FieldsFunc(command, func(r rune) bool { return strings.ContainsRune(" \t\n;&|()<>`'\"", r) })
	for _, w := range words {
		if strings.HasPrefix(w, "-") || strings.Contains(w, "=") || strings.Contains(w, "$") || strings.Contains(w, "*") {
			continue
		}
		for _, dir := range []string{"/testbed/", "/app/", "/home/"} {
			w = strings.TrimPrefix(w, dir)
		}
		if strings.HasPrefix(w, "/") || strings.HasPrefix(w, "~") {
			continue
		}
		w = path.Clean(w)
		if strings.Contains(w, "/") || scriptExt(path.Ext(w)) {
			out[w] = true
		}
	}
	return out
}

// scriptExt: a file named with ext is a script an interpreter runs.
func scriptExt(ext string) bool {
	switch ext {
	case ".sh", ".bash", ".py", ".pl", ".rb", ".js", ".mjs", ".cjs", ".ts":
		return true
	}
	return false
}

// runsScript is the path of s that in's test command names.
func runsScript(s section, in Instance) (string, bool) {
	if in.TestCommand == "" {
		return "", false
	}
	named := commandScripts(in.TestCommand)
	for _, p := range s.paths() {
		if named[p] {
			return p, true
		}
	}
	return "", false
}
