package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/spec"
)

// Workload names.
const (
	WorkloadBare      = "bare"
	WorkloadSynthetic = "synthetic"
)

// workload is what every method's tasks hold; see the package comment.
type workload struct {
	name string
	// answer is the first command, the one that shows the task is ready
	// (`true`; `cd /testbed` in a repository); task is the real task's
	// first command, run next ("" for the bare workload).
	answer, task string
	// repository workloads
	repo    string // owner/name
	source  string // where the repository is mirrored from (a local path)
	insts   []dataset.Instance
	spec    spec.Spec
	install string // the environment's install steps as a script (for the baselines' own builds)
	offline bool   // the environment is a --system-site-packages venv with nothing installed

	// made by setup
	cache       *envcache.Cache // msb's cache of this workload alone
	envLayer    string          // digest of the environment layer
	envTree     string
	repoLayers  []string   // per instance
	repoStacks  [][]string // per instance: the trees msb stacks for its repository, bottom first
	repoTrees   []string   // per instance: its whole /testbed tree, for the baselines
	paperTars   []string   // the venv's tarball, then one per instance
	podmanEnv   string     // image
	images      []string   // podman instance images
	podmanReady bool       // the images are built
}

// WorkloadInfo describes a workload in the report.
type WorkloadInfo struct {
	Name      string `json:"name"`
	Repo      string `json:"repo,omitempty"`
	Source    string `json:"source,omitempty"`
	Instances int    `json:"instances"`
	Answer    string `json:"answer"`
	Task      string `json:"task,omitempty"`
	EnvLayer  string `json:"env_layer,omitempty"`
}

func (w *workload) describe() WorkloadInfo {
	return WorkloadInfo{Name: w.name, Repo: w.repo, Source: w.source, Instances: len(w.insts), Answer: w.answer, Task: w.task, EnvLayer: w.envLayer}
}

func (w *workload) bare() bool { return len(w.insts) == 0 }

func (w *workload) instance(i int) dataset.Instance { return w.insts[i%len(w.insts)] }

// paperTarballs are the tarballs task i extracts: the venv's and its
// repository's (none for the bare workload).
func (w *workload) paperTarballs(i int) []string {
	if w.bare() {
		return nil
	}
	return []string{w.paperTars[0], w.paperTars[1+i%len(w.insts)]}
}

func (w *workload) podmanImage(i int) string {
	if w.bare() {
		return podmanBase
	}
	return w.images[i%len(w.images)]
}

// repoAnswer is a repository task's first command: the shell answers in
// /testbed.
const repoAnswer = "cd " + envcache.Testbed

// taskCommand is the real task's first command: the repository at its
// commit and the package under test importable from /testbed.
func taskCommand(pkg string) string {
	return fmt.Sprintf("cd %s && git rev-parse HEAD >/dev/null && python -c 'import %s'", envcache.Testbed, pkg)
}

// installScript is the environment's build for the baselines' own
// first-time preparation: the same steps msb's build sandbox runs.
func installScript(offline bool, packages, install string) string {
	site := ""
	if offline {
		site = " --system-site-packages"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "set -eux\npython3 -m venv%s %s\nexport PATH=%s/bin:$PATH VIRTUAL_ENV=%s\ncd %s\n", site, envcache.VenvPath, envcache.VenvPath, envcache.VenvPath, envcache.Testbed)
	if packages != "" {
		fmt.Fprintf(&b, "python -m pip install %s\n", packages)
	}
	if install != "" {
		b.WriteString(install + "\n")
	}
	return b.String()
}

// bareWorkload is a sandbox of the host's system dirs answering `true`.
func bareWorkload() *workload {
	return &workload{name: WorkloadBare, answer: "true"}
}

// RealRepo names a real repository for the real workload: the commits on
// the first-parent line from HEAD of a local clone share one environment
// built at the newest of them.
type RealRepo struct {
	Repo    string // owner/name, e.g. psf/requests
	Source  string // a local clone or mirror (never fetched from the network)
	Package string // the package under test, imported by the task command
	// Packages are the shared environment's pip packages: the test runner
	// and what the package under test needs (its checkout in /testbed is
	// what the task imports). No per-instance install step: every method
	// shares one venv, as the comparison requires.
	Packages string
}

func (r RealRepo) name() string { return r.Repo[strings.LastIndexByte(r.Repo, '/')+1:] }

// Requests is the default real workload: psf/requests, its environment
// pytest and requests' release from PyPI (for its dependencies; the task
// imports the checkout's own requests from /testbed, first on sys.path).
var Requests = RealRepo{Repo: "psf/requests", Package: "requests", Packages: "pytest requests"}

// realWorkload reads n commits of r.Source.
func realWorkload(ctx context.Context, r RealRepo, n int) (*workload, error) {
	if r.Source == "" {
		return nil, fmt.Errorf("%w: the real workload needs a local clone of %s (--repo-source %s=PATH; see docs/bench.md)", errSkipped, r.Repo, r.Repo)
	}
	src, err := filepath.Abs(r.Source)
	if err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, "git", "--git-dir", gitDir(src), "rev-list", "--first-parent", "-n", fmt.Sprint(n), "HEAD").Output()
	if err != nil {
		return nil, fmt.Errorf("listing commits of %s: %w", src, err)
	}
	commits := strings.Fields(string(out))
	if len(commits) < n {
		return nil, fmt.Errorf("%s has %d commits on its first-parent line, the benchmark needs %d", src, len(commits), n)
	}
	w := &workload{name: r.name(), answer: repoAnswer, task: taskCommand(r.Package), repo: r.Repo, source: src,
		spec:    spec.Spec{Repo: r.Repo, Version: "bench", Python: "3", Packages: r.Packages},
		install: installScript(false, r.Packages, "")}
	w.insts = instances(w.repo, w.source, commits)
	return w, nil
}

// gitDir is the git directory of a clone or bare repository.
func gitDir(src string) string {
	if fi, err := os.Stat(filepath.Join(src, ".git")); err == nil && fi.IsDir() {
		return filepath.Join(src, ".git")
	}
	return src
}

// instances makes one instance per commit; all share the environment
// built at the first commit.
func instances(repo, source string, commits []string) []dataset.Instance {
	var out []dataset.Instance
	for i, c := range commits {
		out = append(out, dataset.Instance{InstanceID: fmt.Sprintf("%s-%d", strings.ReplaceAll(repo, "/", "__"), i), Repo: repo,
			BaseCommit: c, EnvironmentSetupCommit: commits[0], Version: "bench", RepoURL: source})
	}
	return out
}

// syntheticWorkload is a generated repository of files files of size
// bytes with n commits (each changing one file) in dir, made once and
// reused; its environment is an empty --system-site-packages venv.
func syntheticWorkload(dir string, files, size, n int) (*workload, error) {
	src := filepath.Join(dir, fmt.Sprintf("repo-%dx%d", files, size))
	listFile := src + ".commits"
	commits, err := readLines(listFile)
	if err != nil || len(commits) < n {
		os.RemoveAll(src)
		if commits, err = genRepo(src, files, size, n); err != nil {
			return nil, fmt.Errorf("generating the synthetic repository: %w", err)
		}
		if err := os.WriteFile(listFile, []byte(strings.Join(commits, "\n")+"\n"), 0o644); err != nil {
			return nil, err
		}
	}
	w := &workload{name: WorkloadSynthetic, answer: repoAnswer, task: taskCommand("pkg00"), repo: "bench/synthetic", source: src,
		spec: spec.Spec{Repo: "bench/synthetic", Version: "bench", Python: "3"}, install: installScript(true, "", ""), offline: true}
	w.insts = instances(w.repo, w.source, commits[:n])
	return w, nil
}

func readLines(p string) ([]string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

// genRepo makes a git repository of files files under 40 packages (each
// with an __init__.py) and n commits, each changing one file.
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
		if err := os.MkdirAll(filepath.Dir(path(i)), 0o755); err != nil {
			return nil, err
		}
		if i < 40 {
			if err := os.WriteFile(filepath.Join(filepath.Dir(path(i)), "__init__.py"), nil, 0o644); err != nil {
				return nil, err
			}
		}
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
