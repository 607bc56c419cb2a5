package envcache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/gitcmd"
	"github.com/minisandbox/msb/internal/store"
	"golang.org/x/sys/unix"
)

// repoMtime is the modification time every file of a repository layer gets,
// so that identical files of different commits are one inode in the store
// (layers keep times) and the index's stat data match the tree exactly.
var repoMtime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// repoFormat ends every repository layer's ref and names what the layer
// holds. Refs of an earlier format are not read, so a cache made before a
// change of what a repository layer holds makes its layers again (and,
// since an install layer's key has the repository layer's id, its install
// layers too). "~h2": a delta's .git holds only the objects its commit
// reaches (earlier deltas showed their anchor's, a later commit's
// included) and submodules hold no history after their recorded commit.
const repoFormat = "~h2"

// RepoRef is the ref of a repository layer: repo/<owner>/<name>@<commit>~h2.
func RepoRef(repo, commit string) string { return repoRefPrefix(repo) + commit + repoFormat }

func repoRefPrefix(repo string) string { return "repo/" + repo + "@" }

func mirrorName(repo string) string { return strings.ReplaceAll(repo, "/", "__") }

// MirrorPath is the bare mirror of repo ("owner/name").
func (c *Cache) MirrorPath(repo string) string {
	return c.path("mirrors", mirrorName(repo)+".git")
}

// source says where repo is mirrored from: the instance's repo_url, the
// RepoSources map, ReposDir, else GitHub.
func (c *Cache) source(inst dataset.Instance) string {
	if inst.RepoURL != "" {
		return inst.RepoURL
	}
	if s := c.opts.RepoSources[inst.Repo]; s != "" {
		return s
	}
	if c.opts.ReposDir != "" {
		for _, n := range []string{mirrorName(inst.Repo) + ".git", mirrorName(inst.Repo)} {
			if p := filepath.Join(c.opts.ReposDir, n); isDir(p) {
				return p
			}
		}
	}
	return "https://github.com/" + inst.Repo + ".git"
}

// localSource is where a repository URL of a submodule can be cloned from
// here: RepoSources or ReposDir by the GitHub owner/name of the URL; "" for
// none (the submodule is left uninitialized, as a plain clone leaves it).
func (c *Cache) localSource(url string) string {
	m := githubRE().FindStringSubmatch(url)
	if m == nil {
		return ""
	}
	src := c.source(dataset.Instance{Repo: m[1]})
	if strings.HasPrefix(src, "https://github.com/") {
		return ""
	}
	return src
}

var githubRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:https?://|git@|git://)github\.com[/:]([^/]+/[^/]+?)(?:\.git)?/?$`)
})

// submodules checks out, at the commits the tree records, the submodules
// of dir that have a local source (e.g. astropy's astropy_helpers, which
// its setup.py would otherwise clone from GitHub).
func submodules(ctx context.Context, dir string, local func(url string) string) error {
	if _, err := os.Stat(filepath.Join(dir, ".gitmodules")); err != nil {
		return nil
	}
	out, err := git(ctx, "", "-C", dir, "config", "-f", ".gitmodules", "--get-regexp", `^submodule\..*\.url$`)
	if err != nil {
		return nil // no submodule URLs
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		key, url, ok := strings.Cut(line, " ")
		src := ""
		if ok {
			src = local(url)
		}
		if src == "" {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(key, "submodule."), ".url")
		path, err := git(ctx, "", "-C", dir, "config", "-f", ".gitmodules", "submodule."+name+".path")
		if err != nil {
			continue
		}
		if abs, err := filepath.Abs(src); err == nil {
			src = abs
		}
		if _, err := git(ctx, "", "-C", dir, "-c", "protocol.file.allow=always", "-c", "url.file://"+src+".insteadOf="+url,
			"-c", "advice.detachedHead=false", "submodule", "--quiet", "update", "--init", "--", strings.TrimSpace(path)); err != nil {
			return fmt.Errorf("submodule %s from %s: %w", name, src, err)
		}
	}
	return cleanSubmodules(ctx, filepath.Join(dir, ".git", "modules"))
}

// cleanSubmodules leaves each submodule's git directory under modules with
// its checked-out commit's history and nothing else: the clone brought the
// source's every branch and tag, later commits included, a remote naming a
// host path, reflogs and packed refs. Refs, the remote and logs go; a
// repack keeps only what HEAD reaches and a prune drops the loose rest, so
// later objects are absent, not just unreferenced.
func cleanSubmodules(ctx context.Context, modules string) error {
	var gitDirs []string
	err := filepath.WalkDir(modules, func(p string, d fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist) && p == modules:
			return fs.SkipAll // no submodule was checked out
		case err != nil || !d.IsDir():
			return err
		case d.Name() == "objects" || d.Name() == "refs":
			return fs.SkipDir
		}
		if isDir(filepath.Join(p, "objects")) && isFile(filepath.Join(p, "HEAD")) {
			gitDirs = append(gitDirs, p) // nested submodules are under its modules/
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, g := range gitDirs {
		if err := cleanHistory(ctx, g); err != nil {
			return fmt.Errorf("cleaning the history of submodule %s: %w", filepath.Base(g), err)
		}
	}
	return nil
}

// cleanHistory removes from gitDir every ref, remote and log and every
// object HEAD does not reach.
func cleanHistory(ctx context.Context, gitDir string) error {
	refs, err := git(ctx, "", "--git-dir", gitDir, "for-each-ref", "--format=delete %(refname)")
	if err != nil {
		return err
	}
	if _, err := gitIn(ctx, "", refs, "--git-dir", gitDir, "update-ref", "--no-deref", "--stdin"); err != nil {
		return err
	}
	for _, f := range []string{"logs", "FETCH_HEAD", "ORIG_HEAD", "packed-refs", "description"} {
		if err := os.RemoveAll(filepath.Join(gitDir, f)); err != nil {
			return err
		}
	}
	remotes, _ := git(ctx, "", "--git-dir", gitDir, "remote")
	for _, r := range strings.Fields(remotes) {
		if _, err := git(ctx, "", "--git-dir", gitDir, "config", "--remove-section", "remote."+r); err != nil {
			return err
		}
	}
	steps := [][]string{
		{"--git-dir", gitDir, "-c", "pack.threads=1", "repack", "-a", "-d", "-q"},
		{"--git-dir", gitDir, "prune", "--expire=now"},
	}
	for _, s := range steps {
		if _, err := git(ctx, "", s...); err != nil {
			return err
		}
	}
	return nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// git runs git on the host as gitcmd does: no configuration but the
// repository's own (which msb made) and the command line, no program the
// repository or the environment names.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	return gitcmd.Run(ctx, dir, "", args...)
}

// gitIn is git with stdin as the command's input.
func gitIn(ctx context.Context, dir, stdin string, args ...string) (string, error) {
	return gitcmd.Run(ctx, dir, stdin, args...)
}

func hasCommit(ctx context.Context, gitDir, commit string) bool {
	_, err := git(ctx, "", "--git-dir", gitDir, "cat-file", "-e", commit+"^{commit}")
	return err == nil
}

// mirror makes sure the repository's mirror holds commits, cloning or
// fetching under the repository's lock.
func (c *Cache) mirror(ctx context.Context, r *run, inst dataset.Instance, commits ...string) (string, error) {
	m := c.MirrorPath(inst.Repo)
	missing := func() []string {
		var out []string
		for _, cm := range commits {
			if !hasCommit(ctx, m, cm) {
				out = append(out, cm)
			}
		}
		return out
	}
	if _, err := os.Stat(m); err == nil && len(missing()) == 0 {
		return m, nil
	}
	return m, r.phase(PhaseMirror, func() error {
		l, err := c.lock(ctx, "mirror-"+mirrorName(inst.Repo), nil)
		if err != nil {
			return err
		}
		defer l.unlock()
		src := c.source(inst)
		if _, err := os.Stat(m); errors.Is(err, os.ErrNotExist) {
			tmp := m + ".tmp"
			removeAll(tmp)
			if _, err := git(ctx, "", "clone", "--quiet", "--mirror", src, tmp); err != nil {
				removeAll(tmp)
				return fmt.Errorf("%w: mirroring %s from %s: %v", ErrRepo, inst.Repo, src, err)
			}
			if err := os.Rename(tmp, m); err != nil {
				return err
			}
		}
		if len(missing()) > 0 {
			if _, err := git(ctx, "", "--git-dir", m, "fetch", "--quiet", "--prune", src, "+refs/*:refs/*"); err != nil {
				return fmt.Errorf("%w: updating mirror of %s from %s: %v", ErrRepo, inst.Repo, src, err)
			}
		}
		if miss := missing(); len(miss) > 0 {
			return fmt.Errorf("%w: %s has no commit %s (source %s)", ErrRepo, inst.Repo, strings.Join(miss, ", "), src)
		}
		return nil
	})
}

// repoLayer returns the layer of inst.Repo at commit, building it once.
func (c *Cache) repoLayer(ctx context.Context, r *run, inst dataset.Instance, commit string) (store.LayerID, error) {
	ref := RepoRef(inst.Repo, commit)
	if id, err := c.store.Ref(ref); err == nil && c.store.Has(id) {
		return id, nil
	}
	mirror, err := c.mirror(ctx, r, inst, commit)
	if err != nil {
		return store.LayerID{}, err
	}
	l, err := c.lock(ctx, "repo-"+mirrorName(inst.Repo)+"@"+commit, nil)
	if err != nil {
		return store.LayerID{}, err
	}
	defer l.unlock()
	if id, err := c.store.Ref(ref); err == nil && c.store.Has(id) {
		return id, nil
	}
	r.built = true
	c.repoBuilds.Add(1)
	dir := c.path("build", "repo-"+mirrorName(inst.Repo)+"@"+commit)
	removeAll(dir)
	defer removeAll(dir)
	if err := r.phase(PhaseCheckout, func() error { return checkout(ctx, mirror, commit, filepath.Join(dir, "testbed"), c.localSource) }); err != nil {
		// git's own message for a missing blob reads as corruption; say
		// which files the mirror lacks, and why, when that is the cause.
		if why := treeComplete(ctx, mirror, commit); why != nil {
			return store.LayerID{}, fmt.Errorf("%w: %s@%s: %v (source %s)", ErrRepo, inst.Repo, commit, why, c.source(inst))
		}
		return store.LayerID{}, fmt.Errorf("checking out %s@%s: %w", inst.Repo, commit, err)
	}
	var id store.LayerID
	err = r.phase(PhaseCommit, func() error {
		parents, err := c.deltaParents(ctx, mirror, inst.Repo, commit, dir)
		if err != nil {
			return err
		}
		id, err = c.store.CommitDir(ctx, dir, store.CommitOptions{Parents: parents, Ref: ref, KeepMtime: true, MapOwner: OwnerAsRoot()})
		return err
	})
	if err != nil {
		return store.LayerID{}, fmt.Errorf("committing %s@%s: %w", inst.Repo, commit, err)
	}
	return id, nil
}

// treeComplete checks that gitDir holds every file of commit's tree, after
// a failed checkout. A mirror of a partial clone (a snapshot fetched with a
// size filter) has the commits but not every blob, and git's checkout then
// fails as if the mirror were corrupt; this says which files are missing,
// and why.
func treeComplete(ctx context.Context, gitDir, commit string) error {
	tree, err := git(ctx, "", "--git-dir", gitDir, "ls-tree", "-r", "-z", "--format=%(objecttype) %(objectname)\t%(path)", commit)
	if err != nil {
		return err
	}
	paths := map[string]string{}
	var blobs strings.Builder
	for _, entry := range strings.Split(strings.TrimSuffix(tree, "\x00"), "\x00") {
		kind, rest, _ := strings.Cut(entry, " ")
		sha, path, _ := strings.Cut(rest, "\t")
		if kind == "blob" { // not the commits of submodules
			paths[sha] = path
			blobs.WriteString(sha + "\n")
		}
	}
	out, err := gitIn(ctx, "", blobs.String(), "--git-dir", gitDir, "cat-file", "--batch-check=%(objectname)")
	if err != nil {
		return err
	}
	var missing []string
	for _, line := range strings.Split(out, "\n") {
		if sha, ok := strings.CutSuffix(line, " missing"); ok {
			missing = append(missing, paths[sha]+" (blob "+sha+")")
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	why := "the mirror's source is incomplete"
	if promisor, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "*.promisor")); len(promisor) > 0 {
		why = "the mirror's source is a partial clone"
	}
	files := fmt.Sprintf("%d files of the commit are missing", len(missing))
	if len(missing) == 1 {
		files = "a file of the commit is missing"
	}
	return fmt.Errorf("%s: %s: %s; mirror from a complete clone", why, files, strings.Join(missing[:min(len(missing), 3)], ", "))
}

// checkout writes commit's tree to dir with a small .git: a depth-1 fetch
// from the mirror kept as loose objects (shared between commits in the
// store), HEAD detached at the upstream commit id, no remote, no reflog.
// Every file gets repoMtime and the index is refreshed afterwards, so git
// finds the tree clean without rehashing it.
func checkout(ctx context.Context, mirror, commit, dir string, local func(url string) string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	steps := [][]string{
		{"init", "--quiet", "--template=", dir},
		{"-C", dir, "-c", "fetch.unpackLimit=2147483647", "fetch", "--quiet", "--no-tags", "--depth", "1", "file://" + mirror, commit},
		{"-C", dir, "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", commit},
		{"-C", dir, "config", "core.checkStat", "minimal"},
		{"-C", dir, "config", "core.trustctime", "false"},
		{"-C", dir, "config", "gc.auto", "0"},
		{"-C", dir, "config", "user.name", "msb"},
		{"-C", dir, "config", "user.email", "msb@localhost"},
	}
	for _, s := range steps {
		if _, err := git(ctx, "", s...); err != nil {
			return err
		}
	}
	if err := submodules(ctx, dir, local); err != nil {
		return err
	}
	for _, f := range []string{"FETCH_HEAD", "logs", "ORIG_HEAD", "description"} {
		os.RemoveAll(filepath.Join(dir, ".git", f))
	}
	index := filepath.Join(dir, ".git", "index")
	ts := []unix.Timespec{unix.NsecToTimespec(repoMtime.UnixNano()), unix.NsecToTimespec(repoMtime.UnixNano())}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == index {
			return err
		}
		return unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW)
	})
	if err != nil {
		return fmt.Errorf("setting times: %w", err)
	}
	if _, err := git(ctx, "", "-C", dir, "update-index", "-q", "--refresh"); err != nil {
		return err
	}
	out, err := git(ctx, "", "-C", dir, "status", "--porcelain", "--untracked-files=all")
	if err != nil {
		return err
	}
	if strings.TrimSpace(out) != "" {
		return fmt.Errorf("fresh checkout of %s is not clean: %s", commit, out)
	}
	return nil
}
