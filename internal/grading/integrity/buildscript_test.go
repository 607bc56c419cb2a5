package integrity_test

import (
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/grading/integrity"
)

// rsBase is a build script as crates write them: it generates a file in
// OUT_DIR and tells rustc its name.
const rsBase = `use std::env;
use std::fs;
use std::path::Path;

fn main() {
    let out = env::var("OUT_DIR").unwrap();
    let gen = Path::new(&out).join("version.rs");
    fs::write(&gen, "pub const VERSION: &str = \"1\";").unwrap();
    println!("cargo:rerun-if-changed=build.rs");
}
`

// TestBuildScriptWrites: a line added to build.rs that writes outside
// OUT_DIR, climbs out of it, runs a program (but git reading the
// revision, as ripgrep's build script does) or renames the APIs that do
// is flagged; a write under OUT_DIR is not. Each diff is git's, checked
// with the base file and, where the bindings are in the hunk, without.
func TestBuildScriptWrites(t *testing.T) {
	r := newBaseRepo(t, map[string]string{"build.rs": rsBase})
	inst := r.instance("cargo test")
	add := func(lines ...string) string {
		t.Helper()
		body := strings.Replace(rsBase, "    println!(\"cargo:rerun", strings.Join(lines, "\n")+"\n    println!(\"cargo:rerun", 1)
		return r.diff(t, map[string]string{"build.rs": body})
	}
	for _, tc := range []struct {
		name, diff string
		want       api.Integrity
	}{
		{"a second file in OUT_DIR", add(`    fs::write(Path::new(&out).join("extra.rs"), "").unwrap();`), api.IntegrityOK},
		{"a file under a name bound far above", add(`    fs::write(&gen, "pub const VERSION: &str = \"2\";").unwrap();`), api.IntegrityOK},
		{"the revision from git", add(`    let args = &["rev-parse", "--short=10", "HEAD"];`,
			`    let Ok(output) = std::process::Command::new("git").args(args).output() else { return };`), api.IntegrityOK},
		{"the tests' sources rewritten", add(`    fs::write("tests/parse.rs", "#[test] fn ok() {}").unwrap();`), api.IntegrityTampered},
		{"out of OUT_DIR by ..", add(`    fs::write(Path::new(&out).join("../../../../src/lib.rs"), "").unwrap();`), api.IntegrityTampered},
		{"an absolute path joined", add(`    fs::copy("/tmp/fake.rs", Path::new(&out).join("/testbed/src/lib.rs")).unwrap();`), api.IntegrityTampered},
		{"a file created by a name bound elsewhere", add(`    let dst = env::current_dir().unwrap().join("src/lib.rs");`, `    std::fs::File::create(dst).unwrap();`), api.IntegrityTampered},
		{"OUT_DIR's name bound again", add(`    let out = "src";`, `    fs::write(Path::new(&out).join("lib.rs"), "").unwrap();`), api.IntegrityTampered},
		{"OUT_DIR's name bound by a pattern", add(`    if let Some(out) = Some("tests") {`, `        fs::write(Path::new(&out).join("parse.rs"), "").unwrap();`, `    }`), api.IntegrityTampered},
		{"a path written with spaces around ::", add(`    std::fs :: write("src/lib.rs", "").unwrap();`), api.IntegrityTampered},
		{"a shell", add(`    std::process::Command::new("sh").arg("-c").arg("sed -i s/assert/drop/ tests/*.rs").status().unwrap();`), api.IntegrityTampered},
		{"git writing the tree", add(`    std::process::Command::new("git").args(["checkout", "HEAD~1", "--", "src"]).status().unwrap();`), api.IntegrityTampered},
		{"git with an environment", add(`    std::process::Command::new("git").args(["rev-parse", "HEAD"])`, `        .env("GIT_CONFIG_PARAMETERS", "'core.fsmonitor=sh x'").output().unwrap();`), api.IntegrityTampered},
		{"write imported under its own name", add(`    use std::fs::write;`, `    write("src/lib.rs", "").unwrap();`), api.IntegrityTampered},
		{"fs renamed", add(`    use std::fs as f;`, `    f::write("src/lib.rs", "").unwrap();`), api.IntegrityTampered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !r.applies(t, tc.diff) {
				t.Fatalf("git does not apply the diff:\n%s", tc.diff)
			}
			for _, in := range []integrity.Instance{inst, {TestCommand: inst.TestCommand}} {
				got := integrity.CheckInstance(tc.diff, in)
				if got.Verdict != tc.want {
					t.Fatalf("base known %v: got %s %q, want %s\n%s", in.Base != nil, got.Verdict, got.Reasons(), tc.want, tc.diff)
				}
				if tc.want == api.IntegrityTampered && got.Findings[0].Kind != integrity.KindCargoBuild {
					t.Errorf("flagged as %q, want %q", got.Findings[0].Kind, integrity.KindCargoBuild)
				}
			}
		})
	}
}

// TestBuildScriptWhole: with the base build.rs, a call the patch adds of
// an existing function that writes where its argument says is flagged;
// the diff alone does not show the write.
func TestBuildScriptWhole(t *testing.T) {
	base := strings.Replace(rsBase, "    println!(\"cargo:rerun", "    generate(&gen);\n    println!(\"cargo:rerun", 1) +
		"\nfn generate(dst: &Path) {\n    fs::write(dst, \"pub const VERSION: &str = \\\"1\\\";\").unwrap();\n}\n"
	r := newBaseRepo(t, map[string]string{"build.rs": base})
	d := r.diff(t, map[string]string{"build.rs": strings.Replace(base, "    generate(&gen);\n", "    generate(&gen);\n    generate(Path::new(\"tests/parse.rs\"));\n", 1)})
	if !r.applies(t, d) {
		t.Fatalf("git does not apply the diff:\n%s", d)
	}
	if got := integrity.CheckInstance(d, r.instance("cargo test")); got.Verdict != api.IntegrityTampered || got.Findings[0].Kind != integrity.KindCargoBuild {
		t.Errorf("with the base file: %s %q, want %s", got.Verdict, got.Reasons(), integrity.KindCargoBuild)
	}
}
