package envcache

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestConcurrentSameKey: 16 goroutines prepare the same instance at once;
// the environment and the repository are built once and all get the same
// layers.
func TestConcurrentSameKey(t *testing.T) {
	repo := makeRepo(t, 10, 100, 2)
	rt := testRuntime(t)
	c := openCache(t, Options{Runtime: rt})
	sp := testSpec()
	sp.PipPackages = nil
	var wg sync.WaitGroup
	got := make([]*Prepared, 16)
	errs := make([]error, 16)
	for i := range got {
		wg.Go(func() {
			got[i], errs[i] = c.Prepare(context.Background(), repo.instance(1), sp, nil)
		})
	}
	wg.Wait()
	built := 0
	for i, p := range got {
		if errs[i] != nil {
			t.Fatalf("worker %d: %v", i, errs[i])
		}
		defer p.Release()
		if strings.Join(p.Layers, ":") != strings.Join(got[0].Layers, ":") {
			t.Fatalf("worker %d got %v, worker 0 %v", i, p.Layers, got[0].Layers)
		}
		if !p.Reused {
			built++
		}
	}
	// the repository layer, the environment and the install layer are
	// each built once (by one, two or three of the callers)
	if s := c.Stats(); s.EnvBuilds != 1 || s.InstallBuilds != 1 || s.RepoBuilds != 1 || built < 1 || built > 3 {
		t.Fatalf("stats %+v, %d callers built", s, built)
	}
}

// TestCrashMidCommit kills a builder process while it commits the
// environment: the store verifies clean and the build succeeds on retry.
func TestCrashMidCommit(t *testing.T) {
	repo := makeRepo(t, 10, 100, 1)
	dir := filepath.Join(t.TempDir(), "cache")
	state := t.TempDir()
	sp := testSpec()
	sp.PipPackages = nil
	job, _ := json.Marshal(builderJob{Dir: dir, State: state, Inst: repo.instance(0), Spec: sp, Site: true})
	cmd := exec.Command("/proc/self/exe", "-test.run=^$")
	cmd.Env = append(os.Environ(), builderEnv+"="+string(job))
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "event "+PhaseCommit+" done=false") {
			// the env layer's commit (the repo layer's came first)
			if data, _ := os.ReadDir(filepath.Join(dir, "build")); hasPrefix(data, "env-") {
				cmd.Process.Signal(syscall.SIGKILL)
				killed = true
				break
			}
		}
		t.Log("builder:", line)
	}
	cmd.Wait()
	if !killed {
		t.Fatal("the builder finished before it could be killed")
	}
	rt := testRuntime(t)
	c := openCache(t, Options{Dir: dir, Runtime: rt})
	rep, err := c.Store().Verify(context.Background())
	if err != nil || !rep.OK() {
		t.Fatalf("verify after crash: %v %+v", err, rep.Problems)
	}
	if f, _ := c.Failures(); len(f) != 0 {
		t.Fatalf("a killed build was recorded as failed: %v", f[0])
	}
	p := prepare(t, c, repo.instance(0), sp)
	sb := sandboxOf(t, rt, p)
	sh(t, sb, "python -c 'import sys; assert sys.prefix == \""+VenvPath+"\"'")
	if c.Stats().EnvBuilds != 1 {
		t.Fatalf("stats %+v", c.Stats())
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "build")); len(ents) != 0 {
		t.Fatalf("build dir not cleaned: %v", ents)
	}
}

func hasPrefix(ents []os.DirEntry, p string) bool {
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), p) {
			return true
		}
	}
	return false
}

// TestDedupCommits: each further commit of a repository, one small file
// changed, costs a small fraction of the first on disk (st_blocks).
func TestDedupCommits(t *testing.T) {
	const n = 8
	repo := makeRepo(t, 400, 4096, n)
	c := openCache(t, Options{})
	ctx := context.Background()
	r := &run{timings: map[string]time.Duration{}}
	var disk []int64
	for i := range n {
		if _, err := c.repoLayer(ctx, r, repo.instance(i), repo.Commits[i]); err != nil {
			t.Fatal(err)
		}
		u, err := c.Store().Usage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		disk = append(disk, u.DiskBytes)
	}
	first := disk[0]
	perCommit := (disk[n-1] - disk[0]) / (n - 1)
	t.Logf("first commit %d bytes on disk, each further commit %d bytes", first, perCommit)
	// A further commit is a delta over the first: the directories on the
	// way to its change, the git index, its new blob, its new trees and
	// commit as one pack (135 KB here). As a whole layer it cost a sixth
	// of the first (1 MB), most of it directory blocks: every directory,
	// .git/objects/xx included.
	if perCommit > first/25 || perCommit > 256<<10 {
		t.Fatalf("each further commit costs %d bytes; the first %d", perCommit, first)
	}
}

// TestCopyMode prepares a private copy of the layers and works in it.
func TestCopyMode(t *testing.T) {
	repo := makeRepo(t, 5, 100, 2)
	rt := testRuntime(t)
	c := openCache(t, Options{Runtime: rt, CopyMode: true})
	sp := testSpec()
	sp.PipPackages = nil
	p := prepare(t, c, repo.instance(1), sp)
	if len(p.Layers) != 1 || !strings.HasPrefix(p.Layers[0], c.path("tasks")) {
		t.Fatalf("copy mode layers %v", p.Layers)
	}
	sb := sandboxOf(t, rt, p)
	if got := sh(t, sb, "git status --porcelain; cat $VIRTUAL_ENV/msb-installed; git log -1 --format=%H"); got != "installed\n"+repo.Commits[1] {
		t.Fatalf("copy mode sandbox: %q", got)
	}
	dir := p.Layers[0]
	sb.Close()
	p.Release()
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("task dir left after Release")
	}
}

// TestPartialCloneSource: a repository source that is a partial clone (a
// snapshot fetched with a blob size filter, its promisor settings gone)
// has the commit but not every file of it. The repository layer is refused
// as ErrRepo, naming the missing file and the reason, where git's checkout
// said "possible repository corruption on the remote side".
func TestPartialCloneSource(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	runCmd(t, src, "git", "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(src, "big.dat"), []byte(strings.Repeat("0123456789abcdef", 512)), 0o644)
	os.WriteFile(filepath.Join(src, "small.txt"), []byte("small\n"), 0o644)
	runCmd(t, src, "git", "add", "-A")
	runCmd(t, src, "git", "commit", "-q", "-m", "one")
	runCmd(t, src, "git", "config", "uploadpack.allowFilter", "true")
	partial := filepath.Join(dir, "partial.git")
	runCmd(t, dir, "git", "clone", "-q", "--bare", "--filter=blob:limit=1k", "file://"+src, partial)
	runCmd(t, partial, "git", "config", "--unset", "remote.origin.promisor")

	inst := testRepo{Path: partial, Commits: []string{runCmd(t, src, "git", "rev-parse", "HEAD")}}.instance(0)
	c := openCache(t, Options{Runtime: testRuntime(t)})
	_, err := c.Prepare(context.Background(), inst, testSpec(), nil)
	if !errors.Is(err, ErrRepo) || !strings.Contains(err.Error(), "partial clone") || !strings.Contains(err.Error(), "big.dat (blob ") {
		t.Fatalf("Prepare from a partial clone: %v, want ErrRepo naming big.dat and the partial clone", err)
	}
	if strings.Contains(err.Error(), "small.txt") {
		t.Errorf("the error names a file the mirror has: %v", err)
	}
}
