package envcache

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/demo"
)

// hostileHostGit is configuration that would make host git run a program
// (each touches a marker named after it in marks) or change what a checkout
// writes: in the source repository's .git, in the user's global config,
// and in the environment.
func hostileHostGit(t *testing.T, src, marks string) {
	t.Helper()
	evil := func(name string) string {
		p := filepath.Join(marks, "bin", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\ntouch "+filepath.Join(marks, "ran-"+name)+"\ncat\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hooks := filepath.Join(marks, "hooks")
	for _, h := range []string{"post-checkout", "reference-transaction", "post-index-change", "pre-commit", "post-commit"} {
		if err := os.MkdirAll(hooks, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(evil("hook"), filepath.Join(hooks, h)); err != nil {
			t.Fatal(err)
		}
	}
	attrs := filepath.Join(marks, "attributes")
	if err := os.WriteFile(attrs, []byte("* filter=evil diff=evil text eol=crlf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	config := "[core]\n\tfsmonitor = " + evil("fsmonitor") + "\n\thooksPath = " + hooks + "\n\tattributesFile = " + attrs +
		"\n\tautocrlf = true\n[filter \"evil\"]\n\tclean = " + evil("clean") + "\n\tsmudge = " + evil("smudge") +
		"\n[diff \"evil\"]\n\ttextconv = " + evil("textconv") + "\n[diff]\n\texternal = " + evil("external") + "\n"
	home := filepath.Join(marks, "home")
	if err := os.MkdirAll(filepath.Join(home, ".config", "git"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(home, ".gitconfig"), filepath.Join(home, ".config", "git", "config")} {
		if err := os.WriteFile(p, []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("GIT_CONFIG_COUNT", "1")
	t.Setenv("GIT_CONFIG_KEY_0", "core.fsmonitor")
	t.Setenv("GIT_CONFIG_VALUE_0", evil("env"))
	// The source repository: its own hooks, config and alternates.
	f, err := os.OpenFile(filepath.Join(src, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(config); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.MkdirAll(filepath.Join(src, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Symlink(evil("srchook"), filepath.Join(src, ".git", "hooks", "post-checkout"))
	os.Symlink(evil("srchook"), filepath.Join(src, ".git", "hooks", "pre-upload-pack"))
	alt := filepath.Join(marks, "host-objects")
	if err := os.MkdirAll(alt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, ".git", "objects", "info", "alternates"), []byte(alt+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRepoLayerHostileGit: a repository layer built on the host from the
// demo's repository, with hostile settings in the source's .git, in the
// user's global git config and in the environment, ran none of their
// programs, and its files are the commit's, byte for byte.
func TestRepoLayerHostileGit(t *testing.T) {
	ctx := context.Background()
	gen, err := demo.Generate(ctx, filepath.Join(t.TempDir(), "demo"))
	if err != nil {
		t.Fatal(err)
	}
	inst := gen.Instances[0]
	files := []string{"calc/stats.py", "tests/test_stats.py"}
	want := map[string]string{}
	for _, f := range files {
		want[f] = runCmd(t, gen.RepoDir, "git", "cat-file", "blob", inst.BaseCommit+":"+f)
	}
	marks := t.TempDir()
	hostileHostGit(t, gen.RepoDir, marks)

	c := openCache(t, Options{})
	r := &run{inst: inst.InstanceID, timings: map[string]time.Duration{}}
	id, err := c.repoLayer(ctx, r, inst, inst.BaseCommit)
	if err != nil {
		t.Fatal(err)
	}
	ran, _ := filepath.Glob(filepath.Join(marks, "ran-*"))
	if len(ran) > 0 {
		t.Errorf("host git ran programs the configuration names: %v", ran)
	}
	tree := filepath.Join(c.store.TreePath(id), "testbed")
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(tree, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(got)) != want[f] {
			t.Errorf("%s in the layer is not the commit's:\n%q\nwant\n%q", f, got, want[f])
		}
	}
}
