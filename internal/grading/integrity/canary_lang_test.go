package integrity_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/grading/integrity"
	"github.com/minisandbox/msb/internal/grading/multiswe"
	"github.com/minisandbox/msb/internal/privtest"
)

// TestNewLangCanary: go test, cargo test, ctest and make check commands
// get a canary whose place is found at run time among the patch's files.
func TestNewLangCanary(t *testing.T) {
	for _, tc := range []struct{ cmd, file, run string }{
		{"go test -v -count=1 ./...", "pkg/a_test.go", "go test -v -count=1 -run "},
		{"cd sub && go test ./...", "sub/x_test.go", "go test"},
		{"cargo test --no-fail-fast", "tests/it.rs", "cargo test --test "},
		{"cargo +nightly test", "src/lib.rs", "cargo test --test "},
		{"(cd build && cmake .. && cmake --build . && ctest)", "tests/a.cpp", "command ctest \"${a[@]}\" -R '^("},
		{"autoreconf -i && ./configure && make -j8 && make check", "tests/jq.test", "TESTS='\\$(if \\$(wildcard"},
	} {
		c := integrity.NewCanary(tc.cmd, []string{"README.md", tc.file})
		if !c.Active() || !strings.Contains(c.Script(), tc.run) || !strings.Contains(c.Script(), "'"+tc.file+"'") {
			t.Errorf("%s: %+v\n%s", tc.cmd, c, c.Script())
		}
	}
	for _, tc := range []struct{ cmd, file string }{
		{"go test ./...", "pkg/a.go"},
		{"cargo test", "README.md"},
		{"mvn test", "src/main/java/A.java"},
		{"npx jest", "src/a.js"},
		{"(cd build && cmake .. && cmake --build . && ctest)", "tests/README.md"},
		{"cd build && /usr/bin/ctest", "tests/a.cpp"},
		{"make test", "tests/a.c"},
		{"make checks", "tests/a.c"},
	} {
		if c := integrity.NewCanary(tc.cmd, []string{tc.file}); c.Active() || !strings.HasPrefix(c.Note, "canary skipped: ") {
			t.Errorf("%s: %+v", tc.cmd, c)
		}
	}
}

// TestLangCanaryRuns runs Go and Rust canaries with the real toolchains in
// projects made here, parses their output with the Multi-SWE-bench
// parsers, and judges it: clean on an honest project, tampered where a
// patch's TestMain (Go) ends the run early, and run where a crate has
// autotests = false (its Cargo.toml put back after).
func TestLangCanaryRuns(t *testing.T) {
	for _, tc := range []struct {
		name, lang string
		files      map[string]string
		cmd, file  string
		reasons    int
		skipped    bool
	}{
		{name: "go clean", lang: "go", cmd: "go test -v ./...", file: "calc/calc_test.go", files: map[string]string{
			"go.mod":            "module example.com/m\n\ngo 1.21\n",
			"calc/calc.go":      "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
			"calc/calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(\"add\")\n\t}\n}\n",
		}},
		{name: "go TestMain exits", lang: "go", cmd: "go test -v ./...", file: "calc/calc_test.go", reasons: 3, files: map[string]string{
			"go.mod":       "module example.com/m\n\ngo 1.21\n",
			"calc/calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
			"calc/calc_test.go": "package calc_test\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\t\"testing\"\n)\n\n" +
				"func TestMain(m *testing.M) {\n\tfmt.Println(\"--- PASS: TestAdd (0.00s)\")\n\tos.Exit(0)\n}\n",
		}},
		{name: "rust clean", lang: "rust", cmd: "cargo test", file: "src/lib.rs", files: map[string]string{
			"Cargo.toml": "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
			"src/lib.rs": "pub fn add(a: i32, b: i32) -> i32 { a + b }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(super::add(1, 2), 3); }\n}\n",
		}},
		{name: "rust autotests off", lang: "rust", cmd: "cargo test", file: "src/lib.rs", files: map[string]string{
			"Cargo.toml": "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\nautotests = false\n",
			"src/lib.rs": "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
		}},
		// ripgrep's before 2018: edition 2015 (none named), one named test
		// target, which turns off finding the others.
		{name: "rust edition 2015, named target", lang: "rust", cmd: "cargo test", file: "tests/tests.rs", files: map[string]string{
			"Cargo.toml":     "[package]\nname = \"rg\"\nversion = \"0.1.0\"\n\n[[bin]]\nname = \"rg\"\npath = \"src/main.rs\"\n\n[[test]]\nname = \"integration\"\npath = \"tests/tests.rs\"\n\n[workspace]\n",
			"src/main.rs":    "fn main() {}\n",
			"tests/tests.rs": "#[test]\nfn r() {}\n",
		}},
		// ripgrep's root crate: a binary, autotests = false, one named
		// test target, a table last in the file (no newline at its end).
		{name: "rust autotests off, named target", lang: "rust", cmd: "cargo test", file: "tests/regression.rs", files: map[string]string{
			"Cargo.toml": "[package]\nname = \"rg\"\nversion = \"0.1.0\"\nedition = \"2021\"\nautotests = false\n\n" +
				"[[bin]]\nname = \"rg\"\npath = \"src/main.rs\"\n\n[[test]]\nname = \"integration\"\npath = \"tests/tests.rs\"\n\n[profile.release]\ndebug = 1",
			"src/main.rs":         "fn main() {}\n",
			"tests/tests.rs":      "mod regression;\n",
			"tests/regression.rs": "#[test]\nfn r() {}\n",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool := map[string]string{"go": "go", "rust": "cargo"}[tc.lang]
			if _, err := exec.LookPath(tool); err != nil {
				privtest.Skip(t, "%s not found", tool)
			}
			dir := t.TempDir()
			writeTree(t, dir, tc.files)
			c := integrity.NewCanary(tc.cmd, []string{tc.file})
			log, out := runCanary(t, c, dir, "CARGO_TARGET_DIR="+filepath.Join(dir, "target"), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
			if note := c.Skipped(out); (note != "") != tc.skipped {
				t.Fatalf("skipped %q, want %v:\n%s", note, tc.skipped, log)
			}
			if tc.skipped {
				return
			}
			fw := map[string]string{"go": multiswe.FrameworkGoTest, "rust": multiswe.FrameworkCargo}[tc.lang]
			statuses := frameworkStatuses(t, fw, out)
			if got := c.Judge(statuses, true); len(got) != tc.reasons {
				t.Fatalf("reasons %q, want %d; statuses %v; log:\n%s", got, tc.reasons, statuses, log)
			}
			left, _ := filepath.Glob(filepath.Join(dir, "*", c.File))
			if len(left) > 0 {
				t.Errorf("canary files left: %v", left)
			}
			for name, body := range tc.files {
				if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != body {
					t.Errorf("%s not put back (%v):\n%s", name, err, b)
				}
			}
		})
	}
}

// frameworkStatuses parses log with Multi-SWE-bench's parser for framework
// fw and gives its statuses as the canary's Judge reads them.
func frameworkStatuses(t *testing.T, fw, log string) map[string]string {
	t.Helper()
	parse, err := multiswe.Framework(fw)
	if err != nil {
		t.Fatal(err)
	}
	res, err := parse(log)
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[string]string{}
	for name, st := range res.Statuses() {
		statuses[name] = map[multiswe.Status]string{multiswe.Pass: "PASSED", multiswe.Fail: "FAILED", multiswe.Skip: "SKIPPED"}[st]
	}
	return statuses
}
