// Package gitcmd runs git the way msb must: so that no repository, and no
// configuration outside the command line, can make git run a program or
// read another repository.
//
// A repository's configuration (.git/config) and attributes name programs
// git runs on its own: core.fsmonitor on every status or add, hooks
// (core.hooksPath, .git/hooks) on checkout and commit, filter drivers on
// checkout and add, diff.external and textconv drivers on diff. Git msb
// runs on the host must run none of them, and git it runs in a sandbox
// for grading must not let them change what it reads. The settings here
// switch each off on the command line (which outranks every file), the
// environment leaves out the system and global configuration and every
// GIT_* variable that would move git to another repository, index or
// object directory, and Shell does the same for a script that runs in a
// sandbox, where the repository's own filter drivers are also emptied.
//
// Without the global configuration, host git takes proxies from the
// standard http_proxy/https_proxy variables only; a repository that needs
// credentials is mirrored from a local clone (repos_dir, repo_sources).
package gitcmd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Settings are the -c settings every git msb runs gets: no fsmonitor, no
// hooks, no attributes file outside the repository, no pager, editor,
// askpass, credential helper, ssh or proxy command, no signing program,
// no line-ending conversion, and no ext:: transport (which runs a
// command). diff.external cannot be emptied this way (git then tries to
// run ""): a caller of git diff passes --no-ext-diff and --no-textconv.
var Settings = []string{
	"core.fsmonitor=false",
	"core.hooksPath=/dev/null",
	"core.attributesFile=/dev/null",
	"core.autocrlf=false",
	"core.pager=cat",
	"core.editor=true",
	"core.askPass=",
	"core.sshCommand=ssh",
	"core.gitProxy=",
	"credential.helper=",
	"commit.gpgSign=false",
	"tag.gpgSign=false",
	"protocol.ext.allow=never",
}

// Args are Settings as -c options followed by args.
func Args(args ...string) []string {
	out := make([]string, 0, 2*len(Settings)+len(args))
	for _, s := range Settings {
		out = append(out, "-c", s)
	}
	return append(out, args...)
}

// Env is environ without any GIT_* variable (GIT_DIR, GIT_WORK_TREE,
// GIT_INDEX_FILE, GIT_CONFIG_*, GIT_EXTERNAL_DIFF ... would steer git) and
// with the system and global configuration, system attributes and
// terminal prompts switched off; extra (KEY=value) is added last.
func Env(environ []string, extra ...string) []string {
	out := make([]string, 0, len(environ)+5+len(extra))
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "GIT_") {
			out = append(out, kv)
		}
	}
	out = append(out, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	return append(out, extra...)
}

// Command is git with args in dir, with Settings and Env (extra added to
// the environment).
func Command(ctx context.Context, dir string, extra []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "git", Args(args...)...)
	cmd.Dir = dir
	cmd.Env = Env(os.Environ(), extra...)
	return cmd
}

// Run runs Command with stdin as its input and returns its output, stdout
// and stderr together; the error names the command and holds the output.
func Run(ctx context.Context, dir, stdin string, args ...string) (string, error) {
	cmd := Command(ctx, dir, nil, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// Shell is a bash prelude for a script that runs git in a sandbox
// on the repository at dir, whose configuration its user may have written:
// it fixes GIT_DIR and GIT_WORK_TREE to dir (a .git file, a .git symlink
// or core.worktree pointing elsewhere is not followed: a .git that is not
// a directory is an error), clears the GIT_* variables that
// steer git, sets the environment Env sets, and leaves in "$@" the -c
// options of Settings plus one emptying each filter driver the
// repository's configuration defines (a clean or smudge filter would run
// on add and checkout and could rewrite the content). Run git as
// git "$@" ... after it.
func Shell(dir string) string {
	var b strings.Builder
	q := shellQuote(dir)
	fmt.Fprintf(&b, "cd %s || exit 1\n", q)
	// GIT_DIR may name a .git file, which git follows: refuse it.
	fmt.Fprintf(&b, "if [ -L .git ] || [ ! -d .git ]; then printf 'msb: %%s/.git is not a directory\\n' %s >&2; exit 1; fi\n", q)
	b.WriteString("for v in $(compgen -e); do case $v in GIT_*) unset \"$v\" ;; esac; done\n")
	// HOME and XDG_CONFIG_HOME too: a git older than 2.32 ignores
	// GIT_CONFIG_GLOBAL and would read the user's ~/.gitconfig.
	fmt.Fprintf(&b, "export GIT_DIR=%s/.git GIT_WORK_TREE=%s GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 HOME=/nonexistent XDG_CONFIG_HOME=/nonexistent\n", q, q)
	b.WriteString("set --")
	for _, s := range Settings {
		b.WriteString(" -c " + shellQuote(s))
	}
	b.WriteString("\n")
	b.WriteString(`for k in $(git config --name-only --get-regexp '^filter\..*\.(clean|smudge|process|required)$' 2>/dev/null); do
  case $k in *.required) set -- "$@" -c "$k=false" ;; *) set -- "$@" -c "$k=" ;; esac
done
`)
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
