package envcache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrepareSandbox prepares an instance and works in its sandbox: git
// at the base commit, the venv's python with a package from a wheelhouse.
func TestPrepareSandbox(t *testing.T) {
	repo := makeRepo(t, 20, 300, 3)
	rt := testRuntime(t)
	c := openCache(t, Options{Runtime: rt, Wheelhouse: makeWheelhouse(t)})
	inst := repo.instance(2)
	p := prepare(t, c, inst, testSpec())
	if p.Reused || len(p.Layers) != 3 || !p.HostBase || p.InstallLayer == "" {
		t.Fatalf("prepared %+v", p)
	}
	sb := sandboxOf(t, rt, p)
	if got := sh(t, sb, "pwd; git log -1 --format=%H; git status --porcelain"); got != "/testbed\n"+inst.BaseCommit {
		t.Fatalf("pwd/log/status: %q", got)
	}
	if got := sh(t, sb, "which python; python -c 'import msbdemo, sys; print(msbdemo.ANSWER, sys.prefix)'; cat $VIRTUAL_ENV/msb-installed"); got != VenvPath+"/bin/python\n42 "+VenvPath+"\ninstalled" {
		t.Fatalf("venv: %q", got)
	}
	sh(t, sb, "echo '# edit' >> hello.py && git diff > /tmp/p && test -s /tmp/p && git stash -q && git status --porcelain | wc -l | grep -qx 0 && git apply /tmp/p && git diff --stat | grep -q hello.py && git stash list | grep -q stash")
	sh(t, sb, "test -L link.py && test ! -e .git/FETCH_HEAD && ! git remote | grep -q .")
	if _, err := os.Stat(filepath.Join(c.Store().TreePath(mustRef(t, c, RepoRef("demo/proj", inst.BaseCommit))), "testbed", "hello.py")); err != nil {
		t.Fatalf("repo layer has no /testbed: %v", err)
	}
	// the env layer holds the venv and nothing of /testbed
	envTree := c.Store().TreePath(mustRef(t, c, EnvRef(p.EnvKey)))
	if _, err := os.Stat(filepath.Join(envTree, "testbed")); err == nil {
		t.Fatal("env layer contains /testbed")
	}
	if _, err := os.Stat(filepath.Join(envTree, strings.TrimPrefix(VenvPath, "/"), "bin", "python")); err != nil {
		t.Fatalf("env layer has no venv: %v", err)
	}
	// a second instance of the same repo reuses the environment
	p2 := prepare(t, c, repo.instance(1), testSpec())
	if p2.EnvLayer != p.EnvLayer || p2.RepoLayer == p.RepoLayer || p2.InstallKey == p.InstallKey {
		t.Fatalf("second instance: env %s vs %s, repo %s vs %s", p2.EnvLayer, p.EnvLayer, p2.RepoLayer, p.RepoLayer)
	}
	if s := c.Stats(); s.EnvBuilds != 1 || s.InstallBuilds != 2 {
		t.Fatalf("stats %+v", s)
	}
	p3 := prepare(t, c, repo.instance(1), testSpec())
	if !p3.Reused {
		t.Fatal("third prepare built something")
	}
}

func mustRef(t testing.TB, c *Cache, ref string) (id [32]byte) {
	t.Helper()
	l, err := c.Store().Ref(ref)
	if err != nil {
		t.Fatal(err)
	}
	return [32]byte(l)
}

// TestFailedBuildRecorded: a failing install is recorded with its log and
// not retried until asked.
func TestFailedBuildRecorded(t *testing.T) {
	repo := makeRepo(t, 2, 10, 1)
	rt := testRuntime(t)
	dir := filepath.Join(t.TempDir(), "cache")
	c := openCache(t, Options{Dir: dir, Runtime: rt})
	sp := testSpec()
	sp.PipPackages = nil
	sp.Install = "echo about to fail; exit 3"
	_, err := c.Prepare(context.Background(), repo.instance(0), sp, nil)
	var be *BuildError
	if !errors.Is(err, ErrEnvBuildFailed) || !errors.As(err, &be) {
		t.Fatalf("want a build error, got %v", err)
	}
	if !strings.Contains(be.Tail, "about to fail") || !strings.Contains(be.Reason, "status 3") {
		t.Fatalf("build error %+v", be)
	}
	if b, err := os.ReadFile(be.Log); err != nil || !strings.Contains(string(b), "about to fail") {
		t.Fatalf("log %s: %v", be.Log, err)
	}
	// same cache and a new one (another process): no new build
	for _, c := range []*Cache{c, openCache(t, Options{Dir: dir, Runtime: rt})} {
		_, err = c.Prepare(context.Background(), repo.instance(0), sp, nil)
		if !errors.As(err, &be) || !be.Recorded {
			t.Fatalf("want the recorded failure, got %v", err)
		}
		if c.Stats().InstallBuilds != 0 && c.Stats().FailedBuilds != 1 {
			t.Fatalf("rebuilt: %+v", c.Stats())
		}
	}
	if f, _ := c.Failures(); len(f) != 1 {
		t.Fatalf("failures %v", f)
	}
	// --retry-failed builds again, once
	r := openCache(t, Options{Dir: dir, Runtime: rt, RetryFailed: true})
	_, err = r.Prepare(context.Background(), repo.instance(0), sp, nil)
	if !errors.As(err, &be) || be.Recorded || be.Kind != KindInstall || r.Stats().InstallBuilds != 1 {
		t.Fatalf("retry: %v %+v", err, r.Stats())
	}
	_, err = r.Prepare(context.Background(), repo.instance(0), sp, nil)
	if !errors.As(err, &be) || !be.Recorded || r.Stats().InstallBuilds != 1 {
		t.Fatalf("retried twice: %v %+v", err, r.Stats())
	}
}
