package integrity

import (
	"path"
	"regexp"
	"strings"
)

// Jest's configuration can name the tsconfig ts-jest compiles the tests
// with under any name (transform: {'^.+\.ts$': ['ts-jest', {tsconfig:
// 'jest.tsconfig.json'}]}, or the older globals['ts-jest'].tsconfig), and
// keep its settings under package.json's jest key over many lines. Where
// the evaluation has the base files, the ts_config rule reads any JSON
// file that is a TypeScript configuration by its content (a
// compilerOptions key) or that the base Jest configuration names, and the
// js_package rule flags any changed line inside package.json's jest
// object, whatever the line says.

// jestConfigNames are the files Jest reads its configuration from at the
// repository's root; BasePaths asks for them.
var jestConfigNames = []string{"package.json", "jest.config.js", "jest.config.ts", "jest.config.mjs", "jest.config.cjs", "jest.config.json"}

// jestTSConfig is a tsconfig a Jest configuration names: the value of a
// tsconfig (or tsConfig, tsConfigFile) key.
var jestTSConfig = lazyRegexp(`["']?ts[cC]onfig(?:File)?["']?\s*:\s*["']([^"']+)["']`)

// namedTSConfigs are the files the base Jest configuration names as
// ts-jest's tsconfig, by their paths in the repository.
func namedTSConfigs(in Instance) map[string]bool {
	out := map[string]bool{}
	for _, name := range jestConfigNames {
		text, ok := in.base(name)
		if !ok {
			continue
		}
		for _, m := range jestTSConfig().FindAllStringSubmatch(text, -1) {
			p := strings.TrimPrefix(m[1], "<rootDir>/")
			out[path.Clean(strings.TrimPrefix(p, "./"))] = true
		}
	}
	return out
}

// compilerOptions is a TypeScript configuration's key.
var compilerOptions = regexp.MustCompile(`"compilerOptions"\s*:`)

// tsConfigByContent: s changes a JSON file (not named tsconfig*.json,
// which has its rule) that is a TypeScript configuration: the base Jest
// configuration names it, or the file (whole, or the diff where it is
// not known) has a compilerOptions key; and a changed line is more than
// an output-only setting (tsOutputOnly).
func tsConfigByContent(s section) bool {
	if tsOutputOnly(s.changed) {
		return false
	}
	if namedTSConfigs(s.in)[s.file.NewPath] || namedTSConfigs(s.in)[s.file.OldPath] {
		return true
	}
	if f, ok := s.full(); ok {
		return compilerOptions.MatchString(strings.Join(f.Old, "\n")) || compilerOptions.MatchString(strings.Join(f.New, "\n"))
	}
	return compilerOptions.MatchString(s.raw)
}

// isJSON: p is a JSON file (with comments, as tsc reads them).
func isJSON(p string, _ bool) bool {
	ext := path.Ext(p)
	return (ext == ".json" || ext == ".jsonc" || ext == ".json5") && !tsconfigFile(p, false)
}

// jestObjectChanged: s (a package.json known whole) changes a line inside
// its jest object, before or after the patch.
func jestObjectChanged(s section) bool {
	f, ok := s.full()
	if !ok {
		return false
	}
	inOld, inNew := jestObjectLines(f.Old), jestObjectLines(f.New)
	for i := range f.Removed {
		if inOld[i] {
			return true
		}
	}
	for i := range f.Added {
		if inNew[i] {
			return true
		}
	}
	return false
}

// jestKey opens package.json's jest object.
var jestKey = regexp.MustCompile(`^\s*"jest"\s*:`)

// jestObjectLines are the lines of a package.json from its "jest" key to
// the end of its value (by brackets outside strings).
func jestObjectLines(lines []string) map[int]bool {
	out := map[int]bool{}
	depth, in := 0, false
	for i, l := range lines {
		if !in && jestKey.MatchString(l) {
			in, depth = true, 0
		}
		if !in {
			continue
		}
		out[i] = true
		depth += jsonDepth(l)
		if depth <= 0 {
			in = false
		}
	}
	return out
}

// jsonDepth is how many objects and arrays line l opens, less those it
// closes, outside strings.
func jsonDepth(l string) int {
	d, quoted := 0, false
	for i := 0; i < len(l); i++ {
		switch c := l[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '{' || c == '[':
			d++
		case c == '}' || c == ']':
			d--
		}
	}
	return d
}
