package envcache

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/store"
)

// TestSCMRecord: the setuptools-scm version of an instance's commit is
// recorded in the store (the commit's record), so a cache imported without the repository's
// mirror, and with no way to make one, finds the install layer keyed by it
// and gives the task the same variable; without the record it says what
// it lacks instead of building another install layer.
func TestSCMRecord(t *testing.T) {
	repo := makeRepo(t, 8, 100, 3)
	runCmd(t, repo.Path, "git", "tag", "v1.0", repo.Commits[0])
	rt := testRuntime(t)
	c := openCache(t, Options{Runtime: rt})
	inst := repo.instance(2)
	p := prepare(t, c, inst, installSpec(false))
	const want = "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_PROJ=1.1.dev2+g"
	scmVar := func(p *Prepared) string {
		i := slices.IndexFunc(p.Env, func(e string) bool { return strings.HasPrefix(e, want) })
		if i < 0 {
			t.Fatalf("task environment lacks %s...: %q", want, p.Env)
		}
		return p.Env[i]
	}
	v := scmVar(p)

	var archive bytes.Buffer
	refs, err := c.Store().Refs()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range refs {
		names = append(names, r.Name)
	}
	if !slices.Contains(names, CommitRef("demo/proj", inst.BaseCommit)) {
		t.Fatalf("no %s among the refs %q", CommitRef("demo/proj", inst.BaseCommit), names)
	}
	if err := c.Store().Export(context.Background(), &archive, store.ExportOptions{Refs: names}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(repo.Path); err != nil { // no mirror can be made any more
		t.Fatal(err)
	}
	imported := openCache(t, Options{Runtime: rt})
	if _, err := imported.Store().Import(context.Background(), &archive); err != nil {
		t.Fatal(err)
	}
	p2 := prepare(t, imported, inst, installSpec(false))
	if !p2.Reused || p2.InstallKey != p.InstallKey || scmVar(p2) != v {
		t.Fatalf("imported cache: reused %v, install key %s (want %s), %s (want %s)", p2.Reused, p2.InstallKey, p.InstallKey, scmVar(p2), v)
	}
	if _, err := os.Stat(imported.MirrorPath("demo/proj")); err == nil {
		t.Fatal("the imported cache made a mirror")
	}

	if err := imported.Store().DeleteRef(CommitRef("demo/proj", inst.BaseCommit)); err != nil {
		t.Fatal(err)
	}
	again := openCache(t, Options{Dir: imported.Dir(), Runtime: rt}) // a new process: nothing memoized
	_, err = again.Prepare(context.Background(), inst, installSpec(false), nil)
	if err == nil || !strings.Contains(err.Error(), "record "+CommitRef("demo/proj", inst.BaseCommit)+" lacks it") {
		t.Fatalf("prepare without record or mirror: %v", err)
	}
	if s := again.Stats(); s.InstallBuilds != 0 {
		t.Fatalf("built an install layer without its version: %+v", s)
	}
}

// TestCommitRecordFiles: the files read at a commit, present or absent, are
// recorded and read back without the mirror; what the record lacks needs
// the mirror, and the error says which record lacks what.
func TestCommitRecordFiles(t *testing.T) {
	repo := makeRepo(t, 2, 10, 2)
	c := openCache(t, Options{})
	inst := repo.instance(1)
	ctx := context.Background()
	r := &run{inst: inst.InstanceID, timings: map[string]time.Duration{}}
	check := func(c *Cache) {
		t.Helper()
		if text, ok, err := c.fileAt(ctx, r, inst, inst.BaseCommit, "hello.py"); text != "print('hello')\n" || !ok || err != nil {
			t.Fatalf("hello.py: %q %v %v", text, ok, err)
		}
		if _, ok, err := c.fileAt(ctx, r, inst, inst.BaseCommit, "requirements.txt"); ok || err != nil {
			t.Fatalf("requirements.txt, absent: %v %v", ok, err)
		}
	}
	check(c)
	if err := os.RemoveAll(c.MirrorPath("demo/proj")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(repo.Path); err != nil {
		t.Fatal(err)
	}
	again := openCache(t, Options{Dir: c.Dir()})
	check(again)
	_, _, err := again.fileAt(ctx, r, inst, inst.BaseCommit, "setup.py")
	if err == nil || !strings.Contains(err.Error(), "setup.py at "+short(inst.BaseCommit)+" (the store's record "+CommitRef("demo/proj", inst.BaseCommit)+" lacks it)") {
		t.Fatalf("a file the record lacks, without the mirror: %v", err)
	}
}
