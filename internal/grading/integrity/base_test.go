package integrity_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/grading/integrity"
)

// baseRepo is a git repository whose first commit, the base, holds files.
type baseRepo struct {
	dir string
}

// newBaseRepo commits files (path: content) as the base of a new
// repository.
func newBaseRepo(t testing.TB, files map[string]string) baseRepo {
	t.Helper()
	r := baseRepo{dir: t.TempDir()}
	git(t, r.dir, "init", "-q")
	r.write(t, files)
	git(t, r.dir, "add", "-A")
	git(t, r.dir, "commit", "-q", "-m", "base")
	return r
}

func (r baseRepo) write(t testing.TB, files map[string]string) {
	t.Helper()
	for p, body := range files {
		full := filepath.Join(r.dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// diff is git's diff of files written over the base (path: new content),
// the tree reset to the base after.
func (r baseRepo) diff(t testing.TB, files map[string]string) string {
	t.Helper()
	defer func() {
		git(t, r.dir, "reset", "-q", "--hard")
		git(t, r.dir, "clean", "-qfdx")
	}()
	r.write(t, files)
	git(t, r.dir, "add", "-A")
	return git(t, r.dir, "diff", "--cached")
}

// applies: git applies d to the base (as the evaluation does).
func (r baseRepo) applies(t testing.TB, d string) bool {
	t.Helper()
	cmd := exec.Command("git", "apply", "--check", "-")
	cmd.Dir, cmd.Stdin = r.dir, strings.NewReader(d)
	return cmd.Run() == nil
}

// instance is what an evaluation knows of the repository: its files at
// the base commit, read with git.
func (r baseRepo) instance(testCommand string) integrity.Instance {
	return integrity.Instance{TestCommand: testCommand, Base: func(p string) (string, bool) {
		out, err := exec.Command("git", "-C", r.dir, "show", "HEAD:"+p).Output()
		return string(out), err == nil
	}}
}

// TestApplyHunks: git's diffs of several shapes, applied to the base file,
// give the file git has after the change, and say which lines changed;
// a hunk whose line numbers are off is found where its lines are.
func TestApplyHunks(t *testing.T) {
	base := "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\neleven\ntwelve\n"
	for _, tc := range []struct{ name, after string }{
		{"two hunks", "zero\none\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\neleven\nTWELVE\n"},
		{"a line removed", strings.Replace(base, "six\n", "", 1)},
		{"appended", base + "thirteen\n"},
		{"emptied", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newBaseRepo(t, map[string]string{"f.txt": base})
			d := r.diff(t, map[string]string{"f.txt": tc.after})
			f, ok := integrity.ApplyHunks(strings.Split(strings.TrimSuffix(base, "\n"), "\n"), d)
			if !ok {
				t.Fatalf("hunks did not apply:\n%s", d)
			}
			if got := strings.Join(f.New, "\n"); got != strings.TrimSuffix(tc.after, "\n") {
				t.Errorf("new file %q, want %q", got, tc.after)
			}
			if len(f.Changed) != strings.Count(d, "\n+")+strings.Count(d, "\n-")-2 {
				t.Errorf("%d changed lines for the diff:\n%s", len(f.Changed), d)
			}
		})
	}
	t.Run("line numbers off", func(t *testing.T) {
		d := "--- a/f.txt\n+++ b/f.txt\n@@ -2,3 +2,3 @@\n seven\n-eight\n+EIGHT\n nine\n"
		f, ok := integrity.ApplyHunks(strings.Split(strings.TrimSuffix(base, "\n"), "\n"), d)
		if !ok || f.New[7] != "EIGHT" || !f.Removed[7] || !f.Added[7] {
			t.Fatalf("applied %v: %q", ok, f.New)
		}
	})
	t.Run("a blank context line without its space, a signature after", func(t *testing.T) {
		d := "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n\n-c\n+C\n-- \n2.40.0\n"
		f, ok := integrity.ApplyHunks([]string{"a", "", "c", "d"}, d)
		if !ok || strings.Join(f.New, ",") != "a,,C,d" || len(f.Changed) != 2 {
			t.Fatalf("applied %v: %q, %d changed", ok, f.New, len(f.Changed))
		}
	})
	t.Run("context not in the file", func(t *testing.T) {
		if _, ok := integrity.ApplyHunks([]string{"a", "b"}, "@@ -1,2 +1,2 @@\n a\n-c\n+d\n"); ok {
			t.Fatal("applied a hunk whose lines the file does not have")
		}
	})
}

// TestWholeSettingsRustflags: with the base .cargo/config.toml, a line
// added inside a rustflags array is read with the array, whatever the
// hunk's header says and however the line is indented; ripgrep's kind of
// change (code generation flags only) is let through.
func TestWholeSettingsRustflags(t *testing.T) {
	base := "[build]\nrustflags = [\n  \"-C\", \"target-cpu=native\",\n]\n\n[alias]\nxtask = \"run --package xtask --\"\nci = \"test --all\"\n\n[net]\nretry = 2\n"
	r := newBaseRepo(t, map[string]string{".cargo/config.toml": base})
	inst := r.instance("")
	for _, tc := range []struct {
		name, diff string
		want       api.Integrity
	}{
		{"a cfg on a line of its own", r.diff(t, map[string]string{".cargo/config.toml": strings.Replace(base, "\n]\n", "\n\"--cfg\", \"loom\",\n]\n", 1)}), api.IntegrityTampered},
		{"the header names another line", "diff --git a/.cargo/config.toml b/.cargo/config.toml\n--- a/.cargo/config.toml\n+++ b/.cargo/config.toml\n" +
			"@@ -3,2 +3,3 @@ [alias]\n   \"-C\", \"target-cpu=native\",\n+  \"--cfg\", \"loom\",\n ]\n", api.IntegrityTampered},
		{"code generation only", r.diff(t, map[string]string{".cargo/config.toml": strings.Replace(base, "\n]\n", "\n  \"-C\", \"target-feature=+crt-static\",\n]\n", 1)}), api.IntegrityOK},
		{"another setting", r.diff(t, map[string]string{".cargo/config.toml": strings.Replace(base, "retry = 2", "retry = 3", 1)}), api.IntegrityOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !r.applies(t, tc.diff) {
				t.Fatalf("git does not apply the diff:\n%s", tc.diff)
			}
			got := integrity.CheckInstance(tc.diff, inst)
			if got.Verdict != tc.want || tc.want == api.IntegrityTampered && got.Findings[0].Kind != integrity.KindCargo {
				t.Errorf("%s %q, want %s\n%s", got.Verdict, got.Reasons(), tc.want, tc.diff)
			}
		})
	}
}

// TestCargoSwap: a Cargo.toml change in a [patch] or [replace] table (its
// header, or a line the whole file puts under it, far from the header),
// and a Cargo configuration that replaces the sources, put a crate of the
// patch's in place of one the tests use and are flagged; a dependency's
// version raised (tokio-5520's kind of change) is not.
func TestCargoSwap(t *testing.T) {
	base := "[package]\nname = \"calc\"\nversion = \"0.1.0\"\n\n[dev-dependencies]\npretty_assertions = \"1\"\nsocket2 = \"0.4\"\n\n" +
		"[patch.crates-io]\nitoa = { git = \"https://github.com/dtolnay/itoa\" }\n\n\n\n\n[features]\ndefault = []\nfull = []\n"
	r := newBaseRepo(t, map[string]string{"Cargo.toml": base})
	inst := r.instance("cargo test")
	for _, tc := range []struct {
		name, diff string
		want       api.Integrity
	}{
		{"a [patch] table added", r.diff(t, map[string]string{"Cargo.toml": strings.Replace(base, "[features]", "[patch.'https://github.com/x/y']\npretty_assertions = { path = \"fake\" }\n\n[features]", 1)}), api.IntegrityTampered},
		{"a line under the existing [patch] table, far from its header", r.diff(t, map[string]string{"Cargo.toml": strings.Replace(base, "\n\n\n\n[features]", "\n\n\npretty_assertions = { path = \"fake\" }\n\n[features]", 1)}), api.IntegrityTampered},
		{"a dev-dependency's version raised", r.diff(t, map[string]string{"Cargo.toml": strings.Replace(base, `socket2 = "0.4"`, `socket2 = "0.4.9"`, 1)}), api.IntegrityOK},
		{"vendored sources", r.diff(t, map[string]string{".cargo/config.toml": "[source.crates-io]\nreplace-with = \"vendored\"\n\n[source.vendored]\ndirectory = \"fake-vendor\"\n"}), api.IntegrityTampered},
		{"path overrides", r.diff(t, map[string]string{".cargo/config.toml": "paths = [\"fake/pretty_assertions\"]\n"}), api.IntegrityTampered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !r.applies(t, tc.diff) {
				t.Fatalf("git does not apply the diff:\n%s", tc.diff)
			}
			got := integrity.CheckInstance(tc.diff, inst)
			if got.Verdict != tc.want || tc.want == api.IntegrityTampered && got.Findings[0].Kind != integrity.KindCargo {
				t.Errorf("%s %q, want %s\n%s", got.Verdict, got.Reasons(), tc.want, tc.diff)
			}
		})
	}
}
