package integrity_test

import (
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/grading/integrity"
)

// TestBuildRules: the rules for rustflags, build scripts, tsconfig and
// Jest's module mapping flag the changes that can change a test's outcome
// and let through the ones that only change code generation, output or
// the build script's own work.
func TestBuildRules(t *testing.T) {
	for _, tc := range []struct {
		name, diff string
		want       integrity.Kind // "" for ok
	}{
		{"rustflags: --cfg", hunk(".cargo/config.toml", nil, []string{`rustflags = ["--cfg", "tokio_unstable"]`}), integrity.KindCargo},
		{"rustflags: a string of flags", hunk(".cargo/config.toml", nil, []string{`rustflags = "-C debug-assertions=off"`}), integrity.KindCargo},
		{"rustflags: a dotted key", hunk(".cargo/config.toml", nil, []string{`build.rustflags = ["-Cpanic=abort"]`}), integrity.KindCargo},
		{"rustflags: a value changed inside an array", strings.Replace(hunk(".cargo/config.toml", []string{`  "tokio_unstable",`}, []string{`  "loom",`}),
			" @@\n", " @@ rustflags = [\n", 1), integrity.KindCargo},
		{"rustdocflags: --cfg", hunk(".cargo/config", nil, []string{`rustdocflags = ["--cfg", "docsrs"]`}), integrity.KindCargo},
		{"rustflags: target features only", hunk(".cargo/config.toml", nil,
			[]string{"[target.x86_64-unknown-linux-musl]", "rustflags = [", `  "-C", "target-feature=+crt-static",`, `  "-C", "link-self-contained=yes",`, "]"}), ""},
		{"rustflags: target cpu", hunk(".cargo/config.toml", nil, []string{`rustflags = ["-Ctarget-cpu=native"]`}), ""},
		{"build.rs: rustc-flags", hunk("build.rs", nil, []string{`    println!("cargo:rustc-flags=-l dylib=fake");`}), integrity.KindCargoBuild},
		{"build.rs: new-style rustc-cfg", hunk("crates/x/build.rs", nil, []string{`    println!("cargo::rustc-cfg=has_fix");`}), integrity.KindCargoBuild},
		{"build.rs: created", created("build.rs", "fn main() {}"), integrity.KindCargoBuild},
		{"build.rs: rustc-env and the script's own work", hunk("build.rs", nil,
			[]string{`    let args = &["rev-parse", "--short=10", "HEAD"];`, `    let Ok(output) = Command::new("git").args(args).output() else { return };`, `    println!("cargo:rustc-env=GIT_HASH={}", rev);`}), ""},
		{"Cargo.toml: another build script", hunk("Cargo.toml", nil, []string{`build = "tools/fake.rs"`}), integrity.KindCargo},
		{"tsconfig: baseUrl", hunk("tsconfig.json", nil, []string{`    "baseUrl": "./tests/fake",`}), integrity.KindTSConfig},
		{"tsconfig: extends another", hunk("tests/../tsconfig.base.json", nil, []string{`  "extends": "./fake.json",`}), integrity.KindTSConfig},
		{"tsconfig: a mapping inside paths", hunk("tsconfig.json", []string{`      "malevic/*": ["node_modules/malevic/*"]`}, []string{`      "malevic/*": ["fake/*"]`}), integrity.KindTSConfig},
		{"tsconfig: strictness", hunk("src/tsconfig.json", nil, []string{`    "strict": false,`}), integrity.KindTSConfig},
		{"tsconfig: output only", hunk("tsconfig.json", []string{`    "outDir": "build",`}, []string{`    "outDir": "dist",`, `    "declaration": true,`, "    // emitted for the package", `    "exclude": ["dist"]`}), ""},
		{"Jest: moduleNameMapper in a preset", created("jest-preset.json", `{ "moduleNameMapper": { "^lodash$": "<rootDir>/fake.js" } }`), integrity.KindJSRunner},
		{"Jest: setupFilesAfterEnv in a shared module", hunk("config/jest.base.ts", nil, []string{"  setupFilesAfterEnv: ['./noop-expect.ts'],"}), integrity.KindJSRunner},
		{"Jest: source code without its keys", hunk("src/index.ts", nil, []string{"export const modules = {};"}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := integrity.Check(tc.diff, "")
			if tc.want == "" {
				if got.Verdict != api.IntegrityOK {
					t.Errorf("flagged: %q\n%s", got.Reasons(), tc.diff)
				}
				return
			}
			if got.Verdict != api.IntegrityTampered || got.Findings[0].Kind != tc.want {
				t.Errorf("%s %q, want %s\n%s", got.Verdict, got.Reasons(), tc.want, tc.diff)
			}
		})
	}
}
