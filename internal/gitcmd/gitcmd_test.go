package gitcmd_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/gitcmd"
)

// hostile are settings an agent can make in its sandbox's repository or
// home; each names a program that touches ran-<name> in $MARKS.
var hostile = []struct{ name, setup string }{
	{"fsmonitor", `git config core.fsmonitor "$EVIL fsmonitor"`},
	{"hooks", `mkdir -p .git/hooks "$MARKS/hooks" && for h in pre-commit post-commit post-checkout post-index-change reference-transaction; do printf '#!/bin/sh\n%s hooks\n' "$EVIL" | tee .git/hooks/$h > "$MARKS/hooks/$h"; chmod +x .git/hooks/$h "$MARKS/hooks/$h"; done && git config core.hooksPath "$MARKS/hooks"`},
	{"filter", `echo '* filter=evil' >> .gitattributes && git config filter.evil.clean "$EVIL filter" && git config filter.evil.smudge "$EVIL filter" && git config filter.evil.required true`},
	{"textconv", `echo '*.py diff=evil' >> .git/info/attributes && git config diff.evil.textconv "$EVIL textconv" && git config diff.evil.command "$EVIL textconv"`},
	{"external", `git config diff.external "$EVIL external"`},
	{"global", `printf '[core]\n\tfsmonitor = %s global\n\tautocrlf = true\n[diff]\n\texternal = %s global\n' "$EVIL" "$EVIL" > "$HOME/.gitconfig"`},
	{"attributes", `printf '* filter=evil diff=evil\n' > "$MARKS/attrs" && git config core.attributesFile "$MARKS/attrs" && git config filter.evil.clean "$EVIL attributes" && git config filter.evil.required true`},
	{"alternates", `mkdir -p "$MARKS/objects" && echo "$MARKS/objects" >> .git/objects/info/alternates`},
	{"pager", `git config core.pager "$EVIL pager"`},
}

// hostileHost are settings around git on the host, outside the
// repository msb made: the user's global config, the environment.
var hostileHost = []struct{ name, setup string }{
	{"global", `printf '[core]\n\tfsmonitor = %s global\n\thooksPath = %s\n\tautocrlf = true\n[filter "lfs"]\n\tclean = %s global\n\tsmudge = %s global\n\trequired = true\n' "$EVIL" "$MARKS" "$EVIL" "$EVIL" > "$HOME/.gitconfig" && echo '* filter=lfs' >> .gitattributes && printf '#!/bin/sh\n%s global\n' "$EVIL" > "$MARKS/post-checkout" && chmod +x "$MARKS/post-checkout"`},
	{"xdg", `mkdir -p "$HOME/.config/git" && printf '[core]\n\tfsmonitor = %s xdg\n' "$EVIL" > "$HOME/.config/git/config"`},
	{"env", `true`}, // GIT_CONFIG_COUNT and GIT_DIR, set for every case
	{"fsmonitor", hostile[0].setup},
	{"hooks", hostile[1].setup},
	{"textconv", hostile[3].setup},
	{"external", hostile[4].setup},
	{"attributes", hostile[6].setup},
	{"alternates", hostile[7].setup},
	{"pager", hostile[8].setup},
}

// hostileRepo copies the demo's repository, runs setup in it with HOME,
// MARKS and EVIL set, changes calc/stats.py and steers git through the
// environment; it returns the copy and the marks directory.
func hostileRepo(t *testing.T, gen *demo.Generated, setup string) (string, string) {
	t.Helper()
	repo, marks := filepath.Join(t.TempDir(), "calc"), t.TempDir()
	sh(t, "", "cp -a "+gen.RepoDir+" "+repo)
	evil := filepath.Join(marks, "evil")
	if err := os.WriteFile(evil, []byte("#!/bin/sh\ntouch \"$MARKS/ran-$1\"\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", marks)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(marks, ".config"))
	t.Setenv("MARKS", marks)
	t.Setenv("EVIL", evil)
	sh(t, repo, setup)
	sh(t, repo, "echo '# the agent was here' >> calc/stats.py")
	t.Setenv("GIT_CONFIG_COUNT", "1")
	t.Setenv("GIT_CONFIG_KEY_0", "core.fsmonitor")
	t.Setenv("GIT_CONFIG_VALUE_0", evil+" env")
	t.Setenv("GIT_DIR", filepath.Join(marks, "nowhere"))
	return repo, marks
}

func noneRan(t *testing.T, marks string) {
	t.Helper()
	if ran, _ := filepath.Glob(filepath.Join(marks, "ran-*")); len(ran) > 0 {
		t.Fatalf("git ran programs the configuration names: %v", ran)
	}
}

const change = "+# the agent was here\n"

// TestShellHostileRepository: for each hostile setting an agent can make,
// git through Shell (as the agent's diff runs it) runs none of its
// programs and gives the real change.
func TestShellHostileRepository(t *testing.T) {
	gen := generate(t)
	for _, h := range hostile {
		t.Run(h.name, func(t *testing.T) {
			repo, marks := hostileRepo(t, gen, h.setup)
			b, err := exec.Command("bash", "-c", gitcmd.Shell(repo)+`git "$@" add -A && git "$@" diff --cached --no-ext-diff --no-textconv HEAD`).CombinedOutput()
			if err != nil || !strings.Contains(string(b), change) || strings.Contains(string(b), "\r") {
				t.Fatalf("Shell's diff: %v\n%s", err, b)
			}
			noneRan(t, marks)
		})
	}
}

// TestRunHostileHost: for each hostile setting around host git, git
// through Run status, diff, add, commit and checkout run none of its
// programs, and the diff is the real change.
func TestRunHostileHost(t *testing.T) {
	gen := generate(t)
	ctx := context.Background()
	for _, h := range hostileHost {
		t.Run(h.name, func(t *testing.T) {
			repo, marks := hostileRepo(t, gen, h.setup)
			if out, err := gitcmd.Run(ctx, repo, "", "diff", "--no-ext-diff", "--no-textconv", "--", "calc"); err != nil || !strings.Contains(out, change) || strings.Contains(out, "\r") {
				t.Fatalf("diff: %v\n%s", err, out)
			}
			for _, args := range [][]string{{"status", "--porcelain"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x"}, {"checkout", "-q", "HEAD~1", "--", "calc/stats.py"}} {
				if out, err := gitcmd.Run(ctx, repo, "", args...); err != nil {
					t.Fatalf("%v: %s", err, out)
				}
			}
			noneRan(t, marks)
		})
	}
}

var generated struct {
	once sync.Once
	gen  *demo.Generated
	dir  string
	err  error
}

// generate is the demo's project, generated once per test binary.
func generate(t *testing.T) *demo.Generated {
	t.Helper()
	generated.once.Do(func() {
		if generated.dir, generated.err = os.MkdirTemp("", "msb-gitcmd-test-"); generated.err == nil {
			generated.gen, generated.err = demo.Generate(context.Background(), filepath.Join(generated.dir, "demo"))
		}
	})
	if generated.err != nil {
		t.Fatal(generated.err)
	}
	return generated.gen
}

func TestMain(m *testing.M) {
	code := m.Run()
	if generated.dir != "" {
		os.RemoveAll(generated.dir)
	}
	os.Exit(code)
}

// TestShellGitFile: a .git file pointing at another repository is not
// followed: git through Shell fails rather than read that repository.
func TestShellGitFile(t *testing.T) {
	gen := generate(t)
	dir := t.TempDir()
	repo, other := filepath.Join(dir, "calc"), filepath.Join(dir, "other")
	sh(t, "", "cp -a "+gen.RepoDir+" "+repo+" && cp -a "+gen.RepoDir+" "+other)
	sh(t, other, "echo changed >> README.md")
	sh(t, repo, "rm -rf .git && echo 'gitdir: "+other+"/.git' > .git && cp "+other+"/README.md README.md")
	b, err := exec.Command("bash", "-c", gitcmd.Shell(repo)+`git "$@" diff --no-ext-diff HEAD`).CombinedOutput()
	if err == nil {
		t.Fatalf("git followed the .git file:\n%s", b)
	}
}

func sh(t *testing.T, dir, script string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, b)
	}
}
