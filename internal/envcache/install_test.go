package envcache

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/spec"
)

// installSpec's install steps write into the tree as real ones do: a
// tracked file edited by a pre-install step, a version file, egg-info, a
// module built in place, and a link in the venv's site-packages.
func installSpec(edit bool) spec.Spec {
	sp := spec.Spec{Repo: "demo/proj", Version: "1.0", Python: "3.11"}
	if edit {
		sp.PreInstall = []string{"sed -i 's/hello/hi/' hello.py"}
	}
	sp.Install = strings.Join([]string{
		"echo 'version = \"1.2.3\"' > pkg0/_version.py",
		"mkdir -p proj.egg-info && echo 'Name: proj' > proj.egg-info/PKG-INFO",
		"python -c 'import py_compile; py_compile.compile(\"pkg1/mod1.py\", cfile=\"pkg1/mod1_built.pyc\")'",
		"echo /testbed > $(python -c 'import sysconfig; print(sysconfig.get_path(\"purelib\"))')/proj.pth",
	}, " && ")
	return sp
}

// TestInstallLayer: what the install steps write under /testbed and in the
// venv survives into the task, above the repository; a tracked file they
// change is committed, so the task's git diff is empty.
func TestInstallLayer(t *testing.T) {
	repo := makeRepo(t, 8, 100, 2)
	rt := testRuntime(t)
	c := openCache(t, Options{Runtime: rt})
	inst := repo.instance(1)
	p := prepare(t, c, inst, installSpec(true))
	if p.InstallLayer == "" || len(p.Layers) != 3 {
		t.Fatalf("prepared %+v", p)
	}
	// stack order, bottom first: environment, repository, install layer
	want := []string{EnvRef(p.EnvKey), RepoRef("demo/proj", inst.BaseCommit), InstallRef(p.InstallKey)}
	for i, ref := range want {
		id := mustRef(t, c, ref)
		if p.Layers[i] != c.Store().TreePath(id) {
			t.Fatalf("layer %d is %s, want %s (%s)", i, p.Layers[i], c.Store().TreePath(id), ref)
		}
	}
	sb := sandboxOf(t, rt, p)
	got := sh(t, sb, "cat pkg0/_version.py proj.egg-info/PKG-INFO; test -f pkg1/mod1_built.pyc && echo built; cat hello.py; "+
		"python -c 'import sys; print(\"/testbed\" in sys.path)'")
	if got != "version = \"1.2.3\"\nName: proj\nbuilt\nprint('hi')\nTrue" {
		t.Fatalf("install outputs in the task: %q", got)
	}
	if got := sh(t, sb, "git diff HEAD --stat; git status --porcelain --untracked-files=no; git log -1 --format=%s; git rev-parse HEAD^"); got != "msb: install steps\n"+inst.BaseCommit {
		t.Fatalf("git after the install: %q", got)
	}
	// The install layer holds the writes only, the environment none of /testbed.
	tree := c.Store().TreePath(mustRef(t, c, InstallRef(p.InstallKey)))
	for _, f := range []string{"testbed/pkg0/_version.py", "testbed/proj.egg-info/PKG-INFO", "testbed/pkg1/mod1_built.pyc", "testbed/hello.py"} {
		if _, err := os.Stat(filepath.Join(tree, f)); err != nil {
			t.Errorf("install layer lacks %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(tree, "testbed/pkg2/mod2.py")); err == nil {
		t.Error("install layer holds a file the install did not write")
	}
	if _, err := os.Stat(filepath.Join(c.Store().TreePath(mustRef(t, c, EnvRef(p.EnvKey))), "testbed")); err == nil {
		t.Error("environment layer holds /testbed")
	}
	// A second prepare reuses it.
	if p2 := prepare(t, c, inst, installSpec(true)); !p2.Reused || p2.InstallLayer != p.InstallLayer {
		t.Fatalf("second prepare: %+v", p2)
	}
	// Layers names the same three refs, all present.
	sts, err := c.Layers(context.Background(), inst, installSpec(true))
	if err != nil || len(sts) != len(want) {
		t.Fatalf("layers: %v %+v", err, sts)
	}
	for i, st := range sts {
		if st.Ref != want[i] || !st.Present || c.Store().TreePath(st.Layer) != p.Layers[i] {
			t.Fatalf("layer %d: %+v, want %s at %s", i, st, want[i], p.Layers[i])
		}
	}
}

// TestInstallCommitRunsNoHook: install steps that set up git hooks (as the
// npm package pre-commit does) and change a tracked file still commit: the
// failing pre-commit hook and the post-commit hook do not run.
func TestInstallCommitRunsNoHook(t *testing.T) {
	repo := makeRepo(t, 8, 100, 2)
	rt := testRuntime(t)
	c := openCache(t, Options{Runtime: rt})
	inst := repo.instance(1)
	sp := installSpec(true)
	sp.Install = strings.Join([]string{
		"mkdir -p .git/hooks",
		`printf '#!/bin/sh\necho pre >> hooks-ran\nexit 1\n' > .git/hooks/pre-commit`,
		`printf '#!/bin/sh\necho post >> hooks-ran\n' > .git/hooks/post-commit`,
		"chmod +x .git/hooks/pre-commit .git/hooks/post-commit",
	}, " && ")
	p := prepare(t, c, inst, sp)
	sb := sandboxOf(t, rt, p)
	if got := sh(t, sb, "test -e hooks-ran && cat hooks-ran; git log -1 --format=%s; git status --porcelain --untracked-files=no"); got != "msb: install steps" {
		t.Fatalf("after an install that set up hooks: %q", got)
	}
}

// TestInstallLayerDedup: two commits whose install steps write the same
// bytes share one install layer, built once per instance.
func TestInstallLayerDedup(t *testing.T) {
	repo := makeRepo(t, 8, 100, 3)
	c := openCache(t, Options{Runtime: testRuntime(t)})
	a := prepare(t, c, repo.instance(1), installSpec(false))
	b := prepare(t, c, repo.instance(2), installSpec(false))
	if a.InstallKey == b.InstallKey || a.RepoLayer == b.RepoLayer {
		t.Fatalf("two instances, one install key: %s", a.InstallKey)
	}
	if a.InstallLayer != b.InstallLayer {
		t.Fatalf("identical install outputs, two layers: %s %s", a.InstallLayer, b.InstallLayer)
	}
	if s := c.Stats(); s.InstallBuilds != 2 || s.EnvBuilds != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestSCMVersion(t *testing.T) {
	for _, tc := range []struct{ describe, want string }{
		{"5.1.1-12-g955e54221", "5.1.2.dev12+g955e54221"},
		{"5.1.1-0-g955e54221", "5.1.1"},
		{"v0.17.0-100-g1c198a191", "v0.17.1.dev100+g1c198a191"[1:]},
		{"v5.1.dev-623-gd16bfe05a7", "5.1.dev623+gd16bfe05a7"},
		{"4.0.0rc1-3-gabcdef0", "4.0.0rc2.dev3+gabcdef0"},
		{"nonsense", ""},
	} {
		if got := scmVersionOf(tc.describe); got != tc.want {
			t.Errorf("scmVersionOf(%q) = %q, want %q", tc.describe, got, tc.want)
		}
	}
	if got := scmVersionEnv("pytest-dev/pytest", "5.1.2"); got != "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_PYTEST=5.1.2" {
		t.Errorf("env %q", got)
	}
}

// repoWithSubmodule makes demo/helpers and a repository whose last commit
// adds it as the submodule helpers, under its GitHub URL; inst is at that
// commit.
func repoWithSubmodule(t *testing.T) (helpers testRepo, inst dataset.Instance) {
	helpers = makeRepo(t, 1, 10, 1)
	repo := makeRepo(t, 2, 10, 1)
	runCmd(t, repo.Path, "git", "-c", "protocol.file.allow=always", "submodule", "--quiet", "add", helpers.Path, "helpers")
	runCmd(t, repo.Path, "git", "config", "-f", ".gitmodules", "submodule.helpers.url", "https://github.com/demo/helpers.git")
	runCmd(t, repo.Path, "git", "commit", "-qam", "helpers")
	inst = repo.instance(0)
	inst.BaseCommit = runCmd(t, repo.Path, "git", "rev-parse", "HEAD")
	return helpers, inst
}

// TestSubmoduleFromLocalSource: a submodule whose GitHub URL has a local
// source is checked out in the repository layer at the recorded commit,
// and holds nothing after it: the source's later commit, tag and branch
// are absent, not just unreferenced (docs/integrity.md, clean history).
func TestSubmoduleFromLocalSource(t *testing.T) {
	helpers, inst := repoWithSubmodule(t)
	later := runCmd(t, helpers.Path, "sh", "-ec", "echo later >> hello.py && git commit -qam later && git tag v9 && git branch side && git rev-parse HEAD")
	rt := testRuntime(t)
	c := openCache(t, Options{Runtime: rt, RepoSources: map[string]string{"demo/helpers": helpers.Path}})
	p := prepare(t, c, inst, spec.Spec{Repo: "demo/proj", Version: "1.0", Python: "3.11"})
	sb := sandboxOf(t, rt, p)
	if got := sh(t, sb, "cat helpers/hello.py; git status --porcelain; git submodule status | cut -c1-41"); got != "print('hello')\n "+helpers.Commits[0] {
		t.Fatalf("submodule in the task: %q", got)
	}
	history := `cd helpers; git cat-file -e ` + later + ` && echo later readable
git rev-list --all; git for-each-ref; git remote; git reflog --all; git stash list
git fsck --lost-found --no-progress 2>&1
ls $(git rev-parse --git-dir)/packed-refs $(git rev-parse --git-dir)/FETCH_HEAD $(git rev-parse --git-dir)/logs 2>/dev/null
git cat-file --batch-all-objects --batch-check='%(objectname)' | sort > /tmp/held
git rev-list --objects HEAD | cut -d' ' -f1 | sort | diff - /tmp/held`
	if got := sh(t, sb, history); got != helpers.Commits[0] {
		t.Fatalf("the submodule's history in the task:\n%s", got)
	}
}

// TestInstallAfterRepositoryRemade is astropy 1.3's case: the repository
// layer was made while its submodule's source was missing, and the install
// steps, which need the submodule, failed (recorded). Once that repository
// ref is removed and the source given, the repository layer is made again
// with the submodule, and its install layer is a new key: built, not
// refused as the recorded failure (and no install layer of the old
// repository layer would be taken either).
func TestInstallAfterRepositoryRemade(t *testing.T) {
	helpers, inst := repoWithSubmodule(t)
	sp := spec.Spec{Repo: "demo/proj", Version: "1.0", Python: "3.11", Install: "cp helpers/hello.py helpers_copy.py"}
	rt := testRuntime(t)
	dir := filepath.Join(t.TempDir(), "cache")

	without := openCache(t, Options{Runtime: rt, Dir: dir})
	if _, err := without.Prepare(context.Background(), inst, sp, nil); err == nil || !strings.Contains(err.Error(), "install") {
		t.Fatalf("install over a repository without its submodule: %v, want the install's failure", err)
	}
	if err := without.Store().DeleteRef(RepoRef(inst.Repo, inst.BaseCommit)); err != nil {
		t.Fatal(err)
	}
	with := openCache(t, Options{Runtime: rt, Dir: dir, RepoSources: map[string]string{"demo/helpers": helpers.Path}})
	p := prepare(t, with, inst, sp)
	if got := sh(t, sandboxOf(t, rt, p), "cat helpers_copy.py"); got != "print('hello')" {
		t.Fatalf("the install's output in the task: %q", got)
	}
}
