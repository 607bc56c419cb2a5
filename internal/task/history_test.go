package task

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/envcache"
)

// TestCleanHistory: an agent that reads git instead of fixing the bug
// finds nothing of the fix. Every demo instance is opened in a cache of
// its own, the first as a whole repository layer and the others as deltas
// over it (each other instance's base commit is the fix applied plus a
// different bug, so an anchor holds the others' fixed files). In each
// task's sandbox, every object git can read is reachable from HEAD, and
// the fix commit, its fixed files and the other bases are absent, asked
// every way an agent would: cat-file, show, log --all, rev-list --all,
// reflog, fsck --lost-found, the packs and loose objects, refs of every
// kind.
func TestCleanHistory(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	cache, err := envcache.Open(envcache.Options{Dir: filepath.Join(t.TempDir(), "cache"), Runtime: f.env.Runtime})
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Runtime: f.env.Runtime, Cache: cache}
	var boxes []*Sandbox
	for i := range f.gen.Instances {
		sb, err := Open(ctx, env, f.task(t, i, ""), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		boxes = append(boxes, sb)
	}
	for i, sb := range boxes {
		inst := f.gen.Instances[i]
		forbidden := fixObjects(t, f.gen.RepoDir, inst.BaseCommit, inst.EnvironmentSetupCommit)
		for j, other := range f.gen.Instances {
			if j != i {
				forbidden = append(forbidden, other.BaseCommit)
			}
		}
		t.Run(inst.InstanceID, func(t *testing.T) { agentFindsNothing(t, sb, inst.BaseCommit, forbidden) })
	}
}

// fixObjects are the fix commit (good), its tree and the blobs of the files
// it changes from base, read from the demo's repository on the host.
func fixObjects(t *testing.T, repo, base, good string) []string {
	t.Helper()
	objs := []string{good, hostGit(t, repo, "rev-parse", good+"^{tree}")}
	for _, file := range strings.Fields(hostGit(t, repo, "diff", "--name-only", base, good)) {
		objs = append(objs, hostGit(t, repo, "rev-parse", good+":"+file))
	}
	return objs
}

func hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// agentFindsNothing asks the sandbox's git for the forbidden objects every
// way an agent could, and checks that what the repository holds is
// exactly what HEAD reaches.
func agentFindsNothing(t *testing.T, sb *Sandbox, base string, forbidden []string) {
	ctx := context.Background()
	run := func(cmd string) (string, int) {
		t.Helper()
		res, err := sb.run(ctx, cmd, time.Minute)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return strings.TrimSpace(res.Output), res.ExitCode
	}
	for _, sha := range forbidden {
		for _, cmd := range []string{"git cat-file -e " + sha, "git show " + sha} {
			if out, code := run(cmd); code == 0 {
				t.Errorf("%s succeeds: %.200s", cmd, out)
			}
		}
	}
	want := map[string]string{
		"git log --all --format=%H":                base,
		"git rev-list --all":                       base,
		"git reflog --all":                         "",
		"git for-each-ref":                         "",
		"git stash list":                           "",
		"git notes list":                           "",
		"git fsck --lost-found --no-progress 2>&1": "",
		"ls .git/lost-found 2>/dev/null":           "",
		"git remote":                               "",
		"ls .git/packed-refs .git/FETCH_HEAD .git/ORIG_HEAD .git/logs .git/refs/remotes .git/refs/tags/* .git/refs/stash .git/refs/notes 2>/dev/null": "",
	}
	for cmd, w := range want {
		if got, _ := run(cmd); got != w {
			t.Errorf("%s: %q, want %q", cmd, got, w)
		}
	}
	// Absent, not unreferenced: every object of every pack and every loose
	// object is one HEAD reaches.
	held, _ := run("git cat-file --batch-all-objects --batch-check='%(objectname)' | sort -u")
	reach, _ := run("git rev-list --objects HEAD | cut -d' ' -f1 | sort -u")
	if held != reach {
		extra := slices.DeleteFunc(strings.Fields(held), func(s string) bool { return strings.Contains(reach, s) })
		t.Errorf("the repository holds %d objects HEAD does not reach: %.300q", len(extra), extra)
	}
	packed, _ := run("for p in .git/objects/pack/*.idx; do [ -e \"$p\" ] && git show-index < \"$p\"; done | cut -d' ' -f2")
	for _, sha := range forbidden {
		if strings.Contains(packed, sha) {
			t.Errorf("a pack holds %s", sha)
		}
	}
}
