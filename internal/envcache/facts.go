package envcache

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/store"
)

// CommitRef names a commit's record: what msb read about the commit from
// the repository's mirror to compute layer keys (a repository's files at
// the environment commit, for an environment built from its requirements
// file; the version setuptools-scm gives the base commit, for install
// layers and tasks), kept in the store as a layer of one JSON file. A
// cache without the mirror (imported, pulled, its mirrors/ removed) reads
// the record instead, finds the layers with the keys they were built under
// and gives tasks the same environment; only what no record holds needs
// the mirror.
func CommitRef(repo, commit string) string { return "commit/" + repo + "@" + commit }

// commitFactsFile is the record layer's one file.
const commitFactsFile = "facts.json"

// commitFacts is a commit's record.
type commitFacts struct {
	// SCMVersion is scmVersion's answer ("" when no tag comes before the
	// commit); nil when not recorded.
	SCMVersion *string `json:"scm_version,omitempty"`
	// Files holds files' content at the commit by path; a null value is
	// a path the commit does not have.
	Files map[string]*string `json:"files,omitempty"`
}

// commitFacts returns a commit's record (zero when there is none), read
// from the store once per Cache: Prepare asks on every task's start.
func (c *Cache) commitFacts(ctx context.Context, repo, commit string) (commitFacts, error) {
	k := repo + "@" + commit
	c.mu.Lock()
	f, ok := c.facts[k]
	c.mu.Unlock()
	if ok {
		return f, nil
	}
	f, err := c.readFacts(ctx, repo, commit)
	if err == nil {
		c.keepFacts(k, f)
	}
	return f, err
}

func (c *Cache) keepFacts(k string, f commitFacts) {
	c.mu.Lock()
	c.facts[k] = f
	c.mu.Unlock()
}

// readFacts reads a commit's record from the store.
func (c *Cache) readFacts(ctx context.Context, repo, commit string) (commitFacts, error) {
	var f commitFacts
	ref := CommitRef(repo, commit)
	id, err := c.store.Ref(ref)
	if errors.Is(err, store.ErrNotFound) {
		return f, nil
	}
	if err != nil {
		return f, err
	}
	tree, err := c.store.Materialize(ctx, id)
	if err != nil {
		return f, err
	}
	b, err := os.ReadFile(filepath.Join(tree, commitFactsFile))
	if err == nil {
		err = json.Unmarshal(b, &f)
	}
	if err != nil {
		return f, fmt.Errorf("reading %s: %w", ref, err)
	}
	return f, nil
}

// learn adds to a commit's record what update sets, under the commit's
// lock and from the record in the store, so that concurrent learners
// (other processes too) lose nothing. A record that update leaves as it
// was is not written again.
func (c *Cache) learn(ctx context.Context, repo, commit string, update func(*commitFacts)) error {
	l, err := c.lock(ctx, "commit-"+mirrorName(repo)+"@"+commit, nil)
	if err != nil {
		return err
	}
	defer l.unlock()
	f, err := c.readFacts(ctx, repo, commit)
	if err != nil {
		return err
	}
	was, err := json.Marshal(f)
	if err != nil {
		return err
	}
	update(&f)
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if bytes.Equal(was, b) {
		c.keepFacts(repo+"@"+commit, f)
		return nil
	}
	dir, err := os.MkdirTemp(c.path("build"), "commit-")
	if err != nil {
		return err
	}
	defer removeAll(dir)
	if err := os.WriteFile(filepath.Join(dir, commitFactsFile), b, 0o644); err != nil {
		return err
	}
	ref := CommitRef(repo, commit)
	if _, err := c.store.CommitDir(ctx, dir, store.CommitOptions{Ref: ref, MapOwner: OwnerAsRoot()}); err != nil {
		return fmt.Errorf("recording %s: %w", ref, err)
	}
	c.keepFacts(repo+"@"+commit, f)
	return nil
}

// mirrorFor makes sure the mirror holds commit, for a fact the commit's
// record lacks; the error says so.
func (c *Cache) mirrorFor(ctx context.Context, r *run, inst dataset.Instance, commit, what string) (string, error) {
	m, err := c.mirror(ctx, r, inst, commit)
	if err != nil {
		return "", fmt.Errorf("%s at %s (the store's record %s lacks it): %w", what, short(commit), CommitRef(inst.Repo, commit), err)
	}
	return m, nil
}

// fileAt returns the content of path at commit (ok false when the commit
// does not have it): recorded, else read from the mirror and recorded.
func (c *Cache) fileAt(ctx context.Context, r *run, inst dataset.Instance, commit, path string) (text string, ok bool, err error) {
	f, err := c.commitFacts(ctx, inst.Repo, commit)
	if err != nil {
		return "", false, err
	}
	if v, known := f.Files[path]; known {
		if v == nil {
			return "", false, nil
		}
		return *v, true, nil
	}
	m, err := c.mirrorFor(ctx, r, inst, commit, path)
	if err != nil {
		return "", false, err
	}
	var content *string
	if out, err := git(ctx, "", "--git-dir", m, "show", commit+":"+path); err == nil {
		content = &out
	}
	err = c.learn(ctx, inst.Repo, commit, func(f *commitFacts) {
		if f.Files == nil {
			f.Files = map[string]*string{}
		}
		f.Files[path] = content
	})
	if content == nil {
		return "", false, err
	}
	return *content, true, err
}

// scmVersionAt is scmVersion of the instance's base commit: recorded, else
// from the mirror and recorded.
func (c *Cache) scmVersionAt(ctx context.Context, r *run, inst dataset.Instance) (string, error) {
	f, err := c.commitFacts(ctx, inst.Repo, inst.BaseCommit)
	if err != nil {
		return "", err
	}
	if f.SCMVersion != nil {
		return *f.SCMVersion, nil
	}
	m, err := c.mirrorFor(ctx, r, inst, inst.BaseCommit, "the setuptools-scm version")
	if err != nil {
		return "", err
	}
	v := scmVersion(ctx, m, inst.BaseCommit)
	return v, c.learn(ctx, inst.Repo, inst.BaseCommit, func(f *commitFacts) { f.SCMVersion = &v })
}
