package bench

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
	"github.com/minisandbox/msb/internal/spec"
)

// CacheOptions size the environment-cache benchmark.
type CacheOptions struct {
	Ns       []int  // instance counts, ascending (default 1, 10, 50)
	Files    int    // files in the generated repository (default 2000)
	FileSize int    // bytes per file (default 4096)
	Dir      string // scratch dir (default a temp dir, removed after)
	Python   string // interpreter for the shared venv (default: python3 found by envcache.FindPython)
}

// firstCommand is what "task ready" waits for: the shell answers in
// /testbed, with the repository and the venv in place. (Starting python or
// git would time the interpreter, not the instantiation; checkCommand runs
// them once, untimed, to show the environment works.)
const firstCommand = "cd /testbed && test -d .git && test -x " + envcache.VenvPath + "/bin/python"

// checkCommand proves, once per method, that the repository and the venv
// work in the instantiated task.
const checkCommand = "cd /testbed && git rev-parse --short HEAD >/dev/null && python -c 'import sys'"

// Cache compares, for N instances (commits) of one generated repository
// sharing one environment: (1) the paper's method, a tar.gz of the venv and
// one of the repository per instance extracted into a task dir; (2) msb:
// Prepare from the cache, create the overlay sandbox, first command; (3) the
// same in copy mode. Task ready is timed per instance (p50/p95); disk is
// st_blocks of everything the method keeps while N tasks exist.
func Cache(ctx context.Context, rt *sandbox.Runtime, o CacheOptions) ([]Row, error) {
	if len(o.Ns) == 0 {
		o.Ns = []int{1, 10, 50}
	}
	if o.Files == 0 {
		o.Files = 2000
	}
	if o.FileSize == 0 {
		o.FileSize = 4096
	}
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "msb-bench-cache-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	maxN := o.Ns[len(o.Ns)-1]
	src := filepath.Join(dir, "src")
	commits, err := genRepo(src, o.Files, o.FileSize, maxN)
	if err != nil {
		return nil, fmt.Errorf("generating the repository: %w", err)
	}
	pythons := map[string]string{}
	if o.Python != "" {
		pythons["3"] = o.Python
	}
	open := func(name string, copyMode bool) (*envcache.Cache, error) {
		return envcache.Open(envcache.Options{Dir: filepath.Join(dir, name), Runtime: rt, Pythons: pythons, SystemSitePackages: true, CopyMode: copyMode})
	}
	c, err := open("cache", false)
	if err != nil {
		return nil, err
	}
	sp := spec.Spec{Repo: "bench/repo", Version: "1", Python: "3"}
	inst := func(i int) dataset.Instance {
		return dataset.Instance{InstanceID: fmt.Sprintf("bench__repo-%d", i), Repo: "bench/repo", Version: "1",
			BaseCommit: commits[i], EnvironmentSetupCommit: commits[0], RepoURL: src}
	}
	var rows []Row
	t0 := time.Now()
	p, err := c.Prepare(ctx, inst(0), sp, nil)
	if err != nil {
		return nil, fmt.Errorf("building the shared environment: %w", err)
	}
	rows = append(rows, Row{Name: "cache: first build (mirror + env + repo layer)", Value: time.Since(t0).Seconds(), Unit: "s"})
	envTree := p.Layers[len(p.Layers)-2]
	p.Release()
	venvTar := filepath.Join(dir, "paper", "venv.tar.gz")
	os.MkdirAll(filepath.Dir(venvTar), 0o755)
	if err := tarGz(venvTar, envTree, strings.TrimPrefix(envcache.VenvPath, "/")); err != nil {
		return nil, err
	}
	// copy mode shares the built cache: copy mode changes only Prepare's result
	cc, err := open("cache", true)
	if err != nil {
		return nil, err
	}
	have := 1
	for _, n := range o.Ns {
		// grow the cache and the paper's tarballs to n instances (not timed)
		for ; have < n; have++ {
			q, err := c.Prepare(ctx, inst(have), sp, nil)
			if err != nil {
				return nil, err
			}
			q.Release()
		}
		for i := range n {
			tgz := filepath.Join(dir, "paper", fmt.Sprintf("repo-%d.tar.gz", i))
			if _, err := os.Stat(tgz); err == nil {
				continue
			}
			q, err := c.Prepare(ctx, inst(i), sp, nil)
			if err != nil {
				return nil, err
			}
			err = tarGz(tgz, q.Layers[len(q.Layers)-1], "testbed")
			q.Release()
			if err != nil {
				return nil, err
			}
		}
		// (1) the paper: extract both tarballs per task
		var open []*sandbox.Sandbox // ready tasks, closed after each timed method
		var tasks []string
		paper, perr := timeRounds(n, func() error {
			task, err := os.MkdirTemp(dir, "paper-task-")
			if err != nil {
				return err
			}
			tasks = append(tasks, task)
			i := len(tasks) - 1
			for _, tgz := range []string{venvTar, filepath.Join(dir, "paper", fmt.Sprintf("repo-%d.tar.gz", i))} {
				if out, err := exec.Command("tar", "-xzf", tgz, "-C", task).CombinedOutput(); err != nil {
					return fmt.Errorf("tar -xzf %s: %v: %s", tgz, err, out)
				}
			}
			return readyIn(ctx, rt, sandbox.Config{Layers: []string{task}, HostBase: true, Workdir: envcache.Testbed, Env: venvEnv()}, &open)
		})
		paperDisk := diskBytes(append([]string{filepath.Join(dir, "paper")}, tasks...)...)
		closeAll(&open)
		for _, t := range tasks {
			os.RemoveAll(t)
		}
		// (2) msb overlay
		i := 0
		var leased []*envcache.Prepared
		msb, merr := timeRounds(n, func() error {
			q, err := c.Prepare(ctx, inst(i), sp, nil)
			i++
			if err != nil {
				return err
			}
			leased = append(leased, q)
			return readyIn(ctx, rt, q.SandboxConfig(), &open)
		})
		closeAll(&open)
		for _, q := range leased {
			q.Release()
		}
		if merr == nil {
			merr = checkTask(ctx, rt, c, inst(0), sp)
		}
		msbDisk := diskBytes(filepath.Join(dir, "cache", "store"))
		// (3) copy mode: the task trees live until all n tasks exist
		i = 0
		var preps []*envcache.Prepared
		cp, cerr := timeRounds(n, func() error {
			q, err := cc.Prepare(ctx, inst(i), sp, nil)
			i++
			if err != nil {
				return err
			}
			preps = append(preps, q)
			return readyIn(ctx, rt, q.SandboxConfig(), &open)
		})
		copyDisk := diskBytes(filepath.Join(dir, "cache", "store"), filepath.Join(dir, "cache", "tasks"))
		closeAll(&open)
		for _, q := range preps {
			q.Release()
		}
		pr := row(fmt.Sprintf("N=%d paper: tar.gz venv+repo extracted per task", n), paper, perr)
		pr.Value, pr.Unit = float64(paperDisk)/(1<<20), "MiB on disk"
		mr := row(fmt.Sprintf("N=%d msb: Prepare + overlay sandbox + first command", n), msb, merr)
		mr.Value, mr.Unit = float64(msbDisk)/(1<<20), "MiB on disk"
		if merr == nil && perr == nil && paper.P50 > 0 && msbDisk > 0 {
			mr.Note = fmt.Sprintf("p50 %.1f%% of paper, disk %.1fx less", 100*float64(msb.P50)/float64(paper.P50), float64(paperDisk)/float64(msbDisk))
		}
		cr := row(fmt.Sprintf("N=%d msb copy mode: Prepare (copy) + sandbox + first command", n), cp, cerr)
		cr.Value, cr.Unit = float64(copyDisk)/(1<<20), "MiB on disk"
		rows = append(rows, pr, mr, cr)
	}
	if u, err := c.Store().Usage(ctx); err == nil && maxN > 1 {
		rows = append(rows, Row{Name: "cache: store after all instances (dedup ratio)", Value: u.DedupRatio, Unit: "x",
			Note: fmt.Sprintf("logical %.1f MiB, on disk %.1f MiB", float64(u.LogicalBytes)/(1<<20), float64(u.DiskBytes)/(1<<20))})
	}
	return rows, nil
}

func venvEnv() []string {
	return []string{"PATH=" + envcache.VenvPath + "/bin:/usr/local/bin:/usr/bin:/bin", "VIRTUAL_ENV=" + envcache.VenvPath}
}

// readyIn creates a sandbox and runs the first command: the task is ready.
// The sandbox joins open and is closed after the timed rounds (closing is
// not part of getting ready).
func readyIn(ctx context.Context, rt *sandbox.Runtime, spec sandbox.Config, open *[]*sandbox.Sandbox) error {
	sb, err := rt.Create(ctx, spec)
	if err != nil {
		return err
	}
	*open = append(*open, sb)
	res, err := sb.Exec(ctx, session.ExecRequest{Command: firstCommand, Timeout: time.Minute})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("first command exited %d: %s", res.ExitCode, res.Output)
	}
	return nil
}

func closeAll(open *[]*sandbox.Sandbox) {
	for _, sb := range *open {
		sb.Close()
	}
	*open = nil
}

// checkTask instantiates one task, untimed, and runs checkCommand in it.
func checkTask(ctx context.Context, rt *sandbox.Runtime, c *envcache.Cache, in dataset.Instance, sp spec.Spec) error {
	q, err := c.Prepare(ctx, in, sp, nil)
	if err != nil {
		return err
	}
	defer q.Release()
	sb, err := rt.Create(ctx, q.SandboxConfig())
	if err != nil {
		return err
	}
	defer sb.Close()
	res, err := sb.Exec(ctx, session.ExecRequest{Command: checkCommand, Timeout: time.Minute})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("git or python does not work in the task: exit %d: %s", res.ExitCode, res.Output)
	}
	return err
}

// genRepo makes a git repository of files files and n commits, each
// changing one file.
func genRepo(dir string, files, size, n int) ([]string, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@b", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@b")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := git("init", "-q"); err != nil {
		return nil, err
	}
	path := func(i int) string {
		return filepath.Join(dir, fmt.Sprintf("pkg%02d", i%40), fmt.Sprintf("mod%d.py", i))
	}
	for i := range files {
		os.MkdirAll(filepath.Dir(path(i)), 0o755)
		line := fmt.Sprintf("# module %d: some source text\n", i)
		if err := os.WriteFile(path(i), []byte(strings.Repeat(line, size/len(line)+1)[:size]), 0o644); err != nil {
			return nil, err
		}
	}
	var commits []string
	for i := range n {
		if i > 0 {
			f, err := os.OpenFile(path(i*7%files), os.O_APPEND|os.O_WRONLY, 0o644)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(f, "# change %d\n", i)
			f.Close()
		}
		if _, err := git("add", "-A"); err != nil {
			return nil, err
		}
		if _, err := git("commit", "-q", "-m", fmt.Sprintf("commit %d", i)); err != nil {
			return nil, err
		}
		c, err := git("rev-parse", "HEAD")
		if err != nil {
			return nil, err
		}
		commits = append(commits, c)
	}
	return commits, nil
}

func tarGz(dst, dir, member string) error {
	if out, err := exec.Command("tar", "-czf", dst, "-C", dir, member).CombinedOutput(); err != nil {
		return fmt.Errorf("tar -czf %s: %v: %s", dst, err, out)
	}
	return nil
}

// diskBytes is the disk space (st_blocks) of the trees, each inode once.
func diskBytes(paths ...string) int64 {
	type key struct{ dev, ino uint64 }
	seen := map[key]bool{}
	var total int64
	for _, p := range paths {
		filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return nil
			}
			k := key{uint64(st.Dev), st.Ino}
			if !seen[k] {
				seen[k] = true
				total += st.Blocks * 512
			}
			return nil
		})
	}
	return total
}
