package envcache

import (
	"testing"
)

// deltaRepo is a repository whose second commit changes a file, removes a
// file and a directory, adds a directory, turns a file into a directory,
// makes a file executable and retargets a symlink; its third commit changes
// every module, too far from the first to be a delta over it.
func deltaRepo(t *testing.T) testRepo {
	r := makeRepo(t, 40, 200, 1)
	step := func(script string) {
		runCmd(t, r.Path, "sh", "-ec", script)
		r.Commits = append(r.Commits, runCmd(t, r.Path, "git", "rev-parse", "HEAD"))
	}
	step(`echo changed >> pkg1/mod1.py
git rm -q pkg2/mod2.py
git rm -rq pkg3
mkdir -p newdir/deep && echo new > newdir/deep/x.py
git rm -q hello.py && mkdir hello.py && echo inner > hello.py/inner
chmod +x pkg4/mod4.py
ln -sfn pkg1/mod1.py link.py
git add -A && git commit -qm delta`)
	step(`for f in pkg*/*.py; do echo far >> "$f"; done
git commit -qam far`)
	return r
}

// treeListing lists what a task of p sees in /testbed through the real
// overlay: every path with its type, mode, size and time, each file's
// digest, each link's target; git's objects are left out (a delta's view
// has its anchor's too) and so are the index's bytes (it records inode
// numbers) and directories' times under .git (git sets them).
const treeListing = `find . \( -path ./.git/objects -o -path ./.git/index \) -prune -o -path './.git*' -type d -printf '%y %m %p\n' -o -printf '%y %m %s %T@ %p %l\n' | sort
find . -path ./.git -prune -o -type f -print0 | sort -z | xargs -0 sha256sum
git ls-files -s | sha256sum`

// TestDeltaRepoLayer: a commit near a cached one is stored as a delta over
// it; its tasks see exactly the tree a whole layer of the commit gives (on
// overlayfs and in copy mode), and git works in it; a commit far from
// every anchor is whole.
func TestDeltaRepoLayer(t *testing.T) {
	repo := deltaRepo(t)
	rt := testRuntime(t)
	sp := testSpec()
	sp.PipPackages = nil
	c := openCache(t, Options{Runtime: rt})
	p0 := prepare(t, c, repo.instance(0), sp)
	p1 := prepare(t, c, repo.instance(1), sp)
	p2 := prepare(t, c, repo.instance(2), sp)
	if len(p0.RepoStack) != 1 || len(p1.RepoStack) != 2 || p1.RepoStack[0] != p0.RepoLayer || len(p2.RepoStack) != 1 {
		t.Fatalf("repository stacks: first %v, near %v, far %v", p0.RepoStack, p1.RepoStack, p2.RepoStack)
	}
	whole := openCache(t, Options{Runtime: rt})
	pw := prepare(t, whole, repo.instance(1), sp)
	if len(pw.RepoStack) != 1 {
		t.Fatalf("the first layer of a cache is a delta: %v", pw.RepoStack)
	}
	sb := sandboxOf(t, rt, p1)
	got, want := sh(t, sb, treeListing), sh(t, sandboxOf(t, rt, pw), treeListing)
	if got != want {
		t.Fatalf("a delta's tree is not the commit's:\n%s\nwant:\n%s", got, want)
	}
	copied := prepare(t, openCache(t, Options{Runtime: rt, Dir: c.Dir(), CopyMode: true}), repo.instance(1), sp)
	if got := sh(t, sandboxOf(t, rt, copied), treeListing); got != want {
		t.Fatalf("a delta's tree in copy mode is not the commit's:\n%s\nwant:\n%s", got, want)
	}
	checks := "git status --porcelain; git log -1 --format=%H; git fsck --no-dangling --no-progress 2>&1; git cat-file -p HEAD:newdir/deep/x.py; readlink link.py; test ! -e pkg3 && test ! -e pkg2/mod2.py && test -x pkg4/mod4.py && cat hello.py/inner"
	if got := sh(t, sb, checks); got != repo.Commits[1]+"\nnew\npkg1/mod1.py\ninner" {
		t.Fatalf("git in a delta's task: %q", got)
	}
	sh(t, sb, "echo '# edit' >> pkg1/mod1.py && git stash -q && git status --porcelain | wc -l | grep -qx 0 && git stash pop -q && git diff --stat | grep -q pkg1/mod1.py")
}
