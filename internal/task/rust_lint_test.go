package task

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
)

// oldRipgrepProject: a crate whose error macro ends in `return ...;` and
// is used where an expression goes, as ripgrep's errored! was before its
// libripgrep rewrite. rustc 1.91 denies that (semicolon_in_expressions_from_macros),
// rustc 1.90 and the harness's images warned; parse subtracts one until the fix.
var oldRipgrepProject = langProject{
	name: "ripgrep",
	base: map[string]string{
		"Cargo.toml": "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2015\"\n",
		".gitignore": "/target\n",
		"src/lib.rs": oldRipgrepLib("Ok(n) => Ok(n - 1),"),
	},
	tests: map[string]string{"tests/parse.rs": "extern crate calc;\n\n#[test]\nfn parse_works() {\n    assert_eq!(calc::parse(\"5\"), Ok(5));\n}\n"},
	fix:   map[string]string{"src/lib.rs": oldRipgrepLib("Ok(n) => Ok(n),")},
	p2p:   []string{"tests::parse_fails"}, f2p: []string{"parse_works"}, testRunFailed: []string{"parse_works"},
}

// oldRipgrepLib is the crate's src/lib.rs with ok as parse's Ok arm.
func oldRipgrepLib(ok string) string {
	return "macro_rules! errored {\n    ($($tt:tt)*) => {\n        return Err(From::from(format!($($tt)*)));\n    }\n}\n\n" +
		"pub fn parse(s: &str) -> Result<i64, String> {\n    match s.parse::<i64>() {\n        " + ok + "\n" +
		"        Err(err) => errored!(\"{}: {}\", s, err),\n    }\n}\n\n" +
		"#[cfg(test)]\nmod tests {\n    #[test]\n    fn parse_fails() {\n        assert!(super::parse(\"x\").is_err());\n    }\n}\n"
}

// TestRustOldRipgrepMacro evaluates the crate as ripgrep row #954 with
// its built-in spec, which puts the lint back at warn: the gold patch
// resolves, an empty one does not. On the host's rustc (1.91 or later)
// the crate does not compile without that spec.
func TestRustOldRipgrepMacro(t *testing.T) {
	env := langEnv(t)
	if out, err := exec.Command("rustc", "-W", "help").Output(); err != nil || !strings.Contains(string(out), "semicolon-in-expressions-from-macros") {
		t.Fatalf("rustc -W help: no semicolon-in-expressions-from-macros lint (%v)", err)
	}
	in := oldRipgrepProject.rowOf(t, "BurntSushi", "ripgrep", 954)
	tk, err := New(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	gradeGoldAndEmpty(t, env, tk, in, func(_ api.Outcome, ev Evaluation) {
		if !strings.Contains(ev.Artifacts.TestOutput, "test parse_works ... ") {
			t.Fatalf("no parse_works result in the test output:\n%s", ev.Artifacts.TestOutput)
		}
	})
}
