package integrity_test

import (
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/grading/integrity"
)

// jsBase is a TypeScript project tested with ts-jest: Jest's settings
// under package.json's jest key, over many lines, and a jest.config.js
// that names the tsconfig ts-jest compiles the tests with, which only
// extends another.
var jsBase = map[string]string{
	"package.json": `{
  "name": "calc",
  "version": "1.0.0",
  "scripts": {
    "build": "tsc -p tsconfig.json"
  },
  "jest": {
    "roots": [
      "<rootDir>/src",
      "<rootDir>/tests"
    ],
    "moduleFileExtensions": [
      "ts",
      "js"
    ],
    "verbose": true
  },
  "devDependencies": {
    "jest": "^29.0.0",
    "ts-jest": "^29.0.0",
    "typescript": "^5.0.0"
  }
}
`,
	"jest.config.js":      "module.exports = {\n  transform: { '^.+\\\\.ts$': ['ts-jest', { tsconfig: './config/ts-test.json' }] },\n};\n",
	"config/ts-test.json": "{\n  \"extends\": \"../tsconfig.json\",\n  \"include\": [\"../src\", \"../tests\"]\n}\n",
	"config/build.json": "{\n  \"compilerOptions\": {\n    \"target\": \"es2019\",\n    \"module\": \"commonjs\",\n    \"lib\": [\"es2019\"],\n    \"types\": [],\n" +
		"    \"sourceMap\": false,\n    \"strict\": true\n  }\n}\n",
	"src/locale/en.json": "{\n  \"add\": \"add\",\n  \"sub\": \"subtract\"\n}\n",
}

// TestJestWhole: with the base files, a change inside package.json's jest
// object (whatever its key), of a tsconfig Jest's configuration names
// under another name, or of a JSON file that is a TypeScript
// configuration by its content, is flagged; other JSON is not.
func TestJestWhole(t *testing.T) {
	r := newBaseRepo(t, jsBase)
	inst := r.instance("npm test -- --verbose")
	change := func(file, old, new string) string {
		t.Helper()
		if !strings.Contains(jsBase[file], old) {
			t.Fatalf("%s has no %q", file, old)
		}
		return r.diff(t, map[string]string{file: strings.Replace(jsBase[file], old, new, 1)})
	}
	for _, tc := range []struct {
		name, diff string
		want       integrity.Kind
	}{
		{"package.json: a root of the jest key", change("package.json", `"<rootDir>/tests"`, `"<rootDir>/fake"`), integrity.KindJSPackage},
		{"package.json: the version", change("package.json", `"version": "1.0.0"`, `"version": "1.0.1"`), ""},
		{"package.json: a dependency", change("package.json", `"typescript": "^5.0.0"`, `"typescript": "^5.4.0"`), ""},
		{"the tsconfig Jest names extends another", change("config/ts-test.json", `"../tsconfig.json"`, `"./fake.json"`), integrity.KindTSConfig},
		{"a TypeScript configuration by its content", change("config/build.json", `"strict": true`, `"strict": false`), integrity.KindTSConfig},
		{"its output setting", change("config/build.json", `"sourceMap": false`, `"sourceMap": true`), ""},
		{"a locale file", change("src/locale/en.json", `"subtract"`, `"minus"`), ""},
		{"Jest's module mapping in YAML", r.diff(t, map[string]string{"config/jest.yml": "moduleNameMapper:\n  '^../src/calc$': '<rootDir>/fake.js'\n"}), integrity.KindJSRunner},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !r.applies(t, tc.diff) {
				t.Fatalf("git does not apply the diff:\n%s", tc.diff)
			}
			got := integrity.CheckInstance(tc.diff, inst)
			if tc.want == "" {
				if got.Verdict != api.IntegrityOK {
					t.Fatalf("flagged: %q\n%s", got.Reasons(), tc.diff)
				}
				return
			}
			if got.Verdict != api.IntegrityTampered || got.Findings[0].Kind != tc.want {
				t.Fatalf("got %s %q, want %s\n%s", got.Verdict, got.Reasons(), tc.want, tc.diff)
			}
		})
	}
}

// TestTestScript: a change of a script the test command runs (exporting
// RUSTFLAGS before cargo test) is flagged, whatever it changes; the same
// change is not flagged by this rule when the command does not name it.
func TestTestScript(t *testing.T) {
	script := "#!/bin/sh\nset -e\ncargo build --all\ncargo test --all \"$@\"\n"
	r := newBaseRepo(t, map[string]string{"ci/test.sh": script, "src/lib.rs": "pub fn add(a: i32, b: i32) -> i32 { a + b }\n"})
	d := r.diff(t, map[string]string{"ci/test.sh": strings.Replace(script, "set -e\n", "set -e\nexport RUSTFLAGS='--cfg fake_asserts'\n", 1)})
	for _, tc := range []struct {
		command string
		want    api.Integrity
	}{
		{"bash ci/test.sh --no-fail-fast", api.IntegrityTampered},
		{"cd /testbed && ./ci/test.sh", api.IntegrityTampered},
		{"cargo test", api.IntegrityOK},
	} {
		got := integrity.CheckInstance(d, r.instance(tc.command))
		if got.Verdict != tc.want || tc.want == api.IntegrityTampered && got.Findings[0].Kind != integrity.KindTestScript {
			t.Errorf("%q: got %s %q, want %s", tc.command, got.Verdict, got.Reasons(), tc.want)
		}
	}
	lib := r.diff(t, map[string]string{"src/lib.rs": "pub fn add(a: i32, b: i32) -> i32 { b + a }\n"})
	if got := integrity.CheckInstance(lib, r.instance("bash ci/test.sh")); got.Verdict != api.IntegrityOK {
		t.Errorf("a source change flagged: %q", got.Reasons())
	}
}
