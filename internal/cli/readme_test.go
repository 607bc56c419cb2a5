package cli

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// block is one fenced code block of a markdown file.
type block struct {
	info, body string
	line       int
}

func codeBlocks(t *testing.T, path string) []block {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []block
	var cur *block
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &block{info: strings.TrimSpace(strings.TrimPrefix(line, "```")), line: n}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.body += line + "\n"
		}
	}
	if cur != nil {
		t.Fatalf("%s: the block at line %d is not closed", path, cur.line)
	}
	return out
}

// TestReadmeExamples runs every ```sh block of the README, in order, in a
// fresh directory where bin/msb is msb (this test binary) and examples/ is
// the repository's: they must work when pasted. Blocks marked "sh notest"
// need what this machine lacks (and say so); every file of the repository
// any block names must exist.
func TestReadmeExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the README's examples (minutes)")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"bin", "home", "tmp"} {
		if err := os.Mkdir(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := "#!/bin/sh\n" + mainEnv + "=1 exec " + exe + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(work, "bin", "msb"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(repo, "examples"), filepath.Join(work, "examples")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "MSB_STATE_DIR="+stateDir(t), "MSB_CACHE="+filepath.Join(work, "default-cache"),
		"HOME="+filepath.Join(work, "home"), "TMPDIR="+filepath.Join(work, "tmp"), "MSB_CONFIG=", "XDG_CACHE_HOME=")
	examplesBefore := gitStatus(t, repo, "examples")
	repoFile := regexp.MustCompile(`\bexamples/[A-Za-z0-9_.-]+`)
	ran := 0
	for _, b := range codeBlocks(t, filepath.Join(repo, "README.md")) {
		for _, name := range repoFile.FindAllString(b.body, -1) {
			if _, err := os.Stat(filepath.Join(repo, name)); err != nil {
				t.Errorf("README line %d names %s, which the repository lacks", b.line, name)
			}
		}
		switch b.info {
		case "sh":
		case "sh notest", "", "yaml":
			continue
		default:
			t.Errorf("README line %d: block %q: use sh (run by this test) or sh notest", b.line, b.info)
			continue
		}
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", b.body)
		cmd.Dir, cmd.Env = work, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("README line %d:\n%s\nfailed: %v\n%s", b.line, b.body, err, out)
		}
		ran++
	}
	if ran < 10 {
		t.Fatalf("ran only %d README blocks", ran)
	}
	if ents, _ := os.ReadDir(filepath.Join(work, "tmp")); len(ents) != 0 {
		t.Errorf("the examples left %d entries in TMPDIR", len(ents))
	}
	for _, name := range untracked(t, repo, work) {
		t.Errorf("the examples leave %s, which git in the repository would list as untracked (write under demo/, which .gitignore names)", name)
	}
	if after := gitStatus(t, repo, "examples"); after != examplesBefore {
		t.Errorf("the examples changed the repository's examples/:\nbefore:\n%s\nafter:\n%s", examplesBefore, after)
	}
}

// scaffold is what TestReadmeExamples makes in its stand-in for the
// repository (the environment's home, temp and cache dirs, bin/msb, the
// examples link), not the examples.
var scaffold = map[string]bool{"bin": true, "home": true, "tmp": true, "default-cache": true, "examples": true}

// untracked lists what the examples made in work, the stand-in for the
// repository, that git status --porcelain would list there: every entry
// of work that the repository's ignore rules do not cover.
func untracked(t *testing.T, repo, work string) []string {
	t.Helper()
	ents, err := os.ReadDir(work)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if scaffold[e.Name()] {
			continue
		}
		name := e.Name()
		if e.IsDir() {
			name += "/"
		}
		cmd := exec.Command("git", "-C", repo, "check-ignore", "-q", "--no-index", name)
		if err := cmd.Run(); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("git check-ignore %s: %v", name, err)
			}
			out = append(out, name)
		}
	}
	return out
}

// gitStatus is git status --porcelain of path in repo, untracked files
// included.
func gitStatus(t *testing.T, repo, path string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", repo, "status", "--porcelain", "--untracked-files=all", "--", path).Output()
	if err != nil {
		t.Fatalf("git status: %v", err)
	}
	return string(out)
}
