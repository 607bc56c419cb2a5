package integrity

import (
	"path"
	"regexp"
	"strings"
)

// Rules for what changes how the test code is compiled rather than which
// tests run: Cargo's rustflags and build scripts, TypeScript's tsconfig as
// ts-jest compiles the tests with it, and Jest's module mapping wherever
// the configuration keeps it. Each flags only the changes that can change
// a test's outcome; what only changes how code is generated or where
// output goes is let through (the reasons are in docs/integrity.md).

// rustflagsLine: a changed line of a Cargo configuration that sets, or
// continues, rustflags or rustdocflags (as a key, a dotted key or an
// array over several lines).
var rustflagsLine = lazyRegexp(`(?i)\brust(doc)?flags\b`)

// quotedWord is a TOML basic or literal string.
var quotedWord = lazyRegexp(`"([^"\\]*)"|'([^']*)'`)

// codegenFlag is a rustc flag that only chooses how code is generated for
// a target (ripgrep's musl section sets two of them), never which code is
// compiled or whether a failing assertion fails: not --cfg, debug
// assertions, overflow checks, panic strategy or link arguments.
var codegenFlag = lazyRegexp(`^(-C|-Ctarget-feature=\S*|-Ctarget-cpu=\S*|-Clink-self-contained=\S*|target-feature=\S*|target-cpu=\S*|link-self-contained=\S*)$`)

// codegenRustflags lets a Cargo configuration's changes through when
// every flag its rustflags lines name is a code-generation flag.
func codegenRustflags(changed []changedLine) bool {
	for _, l := range changed {
		if !rustflagsLine().MatchString(l.text) && !rustflagsLine().MatchString(l.setting) {
			continue
		}
		text := l.text
		if k, v, ok := strings.Cut(text, "="); ok && rustflagsLine().MatchString(k) {
			text = v
		}
		for _, m := range quotedWord().FindAllStringSubmatch(text, -1) {
			for _, w := range strings.Fields(m[1] + m[2]) {
				if !codegenFlag().MatchString(w) {
					return false
				}
			}
		}
	}
	return true
}

// buildScriptLines are the lines of a Cargo build script that change how
// the crate and its tests compile (a cfg that turns code on, compiler
// flags, link arguments that can wrap any function); rustc-env (a value
// env! reads) and the script's own work are not among them.
var buildScriptLines = lazyRegexp(`rustc-(cfg|flags|link-arg|link-args|link-arg-tests|link-arg-bins|cdylib-link-arg)\b`)

// isBuildScript: p is a Cargo build script, build.rs (the default; a
// Cargo.toml build key names another, which the cargo_test rule reads).
func isBuildScript(p string, _ bool) bool { return path.Base(p) == "build.rs" }

// tsconfigFile: p is a TypeScript configuration file (tsconfig.json,
// tsconfig.<name>.json), which ts-jest compiles the tests with.
func tsconfigFile(p string, _ bool) bool {
	ok, _ := path.Match("tsconfig*.json", path.Base(p))
	return ok
}

// anyContent: a changed line that is more than brackets and commas.
var anyContent = lazyRegexp(`[^\s{}\[\],]`)

// tsOutputKey is a tsconfig setting that only says what tsc emits or
// which files a tsc build takes (ts-jest compiles each file Jest gives it,
// whatever include says), and a comment.
var tsOutputKey = lazyRegexp(`^\s*(//.*|/\*.*|\*.*|"(outDir|outFile|declaration|declarationDir|declarationMap|sourceMap|inlineSourceMap|inlineSources|composite|incremental|tsBuildInfoFile|removeComments|noEmit|emitDeclarationOnly|include|exclude|files|references|watchOptions)"\s*:.*)$`)

// tsOutputOnly lets a tsconfig's changes through when each changed line
// is a bracket, a comment or an output-only setting; any other line
// (paths, baseUrl, rootDirs, extends, strictness, a value inside an array
// or an object over several lines) is flagged.
func tsOutputOnly(changed []changedLine) bool {
	for _, l := range changed {
		if anyContent().MatchString(l.text) && !tsOutputKey().MatchString(l.text) {
			return false
		}
	}
	return true
}

// jestModuleKeys are Jest's configuration keys that map or resolve the
// modules a test imports, or run code before every test file, written in
// any file the configuration requires (a mapper module, a shared
// preset): names no other library uses.
var jestModuleKeys = lazyRegexp(`\b(moduleNameMapper|pathsToModuleNameMapper|moduleDirectories|modulePaths|setupFilesAfterEnv|snapshotResolver|testResultsProcessor|testPathIgnorePatterns|modulePathIgnorePatterns)\b`)

// jsConfigFiles are the files a JavaScript configuration can be written
// in or required from, or read from by a module it requires (YAML).
var jsConfigFiles = []string{"*.js", "*.cjs", "*.mjs", "*.ts", "*.cts", "*.mts", "*.json", "*.yml", "*.yaml"}

// cargoSwapTable is a Cargo.toml table that puts another crate in place
// of a dependency, the tests' included: [patch.<registry>], [replace].
var cargoSwapTable = lazyRegexp(`^\s*\[\s*(patch|replace)\b`)

// cargoConfigSwap is what in a Cargo configuration puts other sources in
// place of the dependencies: [patch], [source] (replace-with, directory),
// path overrides (paths = [...]).
var cargoConfigSwap = lazyRegexp(`^\s*\[\s*(patch|source)\b|^\s*(replace-with|paths|directory)\s*=|^\s*(patch|source)\.`)

// swapsCrates is a Judge for Cargo's files: a changed line that is, or is
// in a table that is, one of swap's (the header, or the table the whole
// file or the hunk says it is under).
func swapsCrates(swap func() *regexp.Regexp) func(s section) bool {
	return func(s section) bool {
		for _, l := range s.changed {
			if swap().MatchString(l.text) || l.table != "" && swap().MatchString(l.table) {
				return true
			}
		}
		return false
	}
}
