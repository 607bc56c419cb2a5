package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/gitcmd"
	"github.com/minisandbox/msb/internal/grading"
)

// Repo is the demo's repository name.
const Repo = "demo/calc"

// Generated is what Generate made.
type Generated struct {
	RepoDir     string             // the git repository
	Instances   []dataset.Instance // one per Bug
	DatasetPath string             // the instances as JSONL
	SpecPath    string             // the spec file for Repo
	Python      string             // interpreter used, and its X.Y version
	PyVersion   string
}

// Generate writes the project, its instances and its spec file under dir.
func Generate(ctx context.Context, dir string) (*Generated, error) {
	g := &Generated{RepoDir: filepath.Join(dir, "calc")}
	var err error
	if g.Python, g.PyVersion, err = findPython(ctx); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(g.RepoDir, 0o755); err != nil {
		return nil, err
	}
	r := repo{ctx: ctx, dir: g.RepoDir}
	r.git("init", "-q")
	for name, body := range files {
		r.write(name, body)
	}
	r.git("add", "-A")
	r.commit("calc: statistics, text and calendar helpers")
	good := r.out("rev-parse", "HEAD")
	for _, b := range Bugs {
		in, err := r.instance(b, good, g.Python)
		if err != nil {
			return nil, fmt.Errorf("generating %s: %w", b.ID, err)
		}
		g.Instances = append(g.Instances, in)
	}
	if r.err != nil {
		return nil, r.err
	}
	g.DatasetPath = filepath.Join(dir, "dataset.jsonl")
	if err := writeJSONL(g.DatasetPath, g.Instances); err != nil {
		return nil, err
	}
	g.SpecPath = filepath.Join(dir, "specs.yaml")
	if err := os.WriteFile(g.SpecPath, []byte(SpecYAML(g.PyVersion)), 0o644); err != nil {
		return nil, err
	}
	return g, nil
}

// SpecYAML is the spec file for the demo repository.
func SpecYAML(pyVersion string) string {
	return fmt.Sprintf(`version: 1
repos:
  %s:
    "*":
      python: "%s"
      pip_packages: []
      install: ""
      test_cmd: python -m unittest -v
      log_parser: unittest
      directives: paths
`, Repo, pyVersion)
}

func findPython(ctx context.Context) (path, version string, err error) {
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		out, err := exec.CommandContext(ctx, p, "-c", `import sys; print("%d.%d" % sys.version_info[:2])`).Output()
		if err == nil {
			return p, strings.TrimSpace(string(out)), nil
		}
	}
	return "", "", fmt.Errorf("the demo needs python3 on the host to measure its tests")
}

// repo runs git in dir, keeping the first error.
type repo struct {
	ctx context.Context
	dir string
	err error
}

// run runs git in the repository, as gitcmd runs it (the user's own git
// configuration cannot change what the demo commits), and returns stdout.
func (r *repo) run(args ...string) string {
	if r.err != nil {
		return ""
	}
	cmd := gitcmd.Command(r.ctx, r.dir, []string{"GIT_AUTHOR_NAME=msb demo", "GIT_AUTHOR_EMAIL=demo@msb.invalid",
		"GIT_COMMITTER_NAME=msb demo", "GIT_COMMITTER_EMAIL=demo@msb.invalid",
		"GIT_AUTHOR_DATE=2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z"}, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		r.err = fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

func (r *repo) git(args ...string)        { r.run(args...) }
func (r *repo) out(args ...string) string { return strings.TrimSpace(r.run(args...)) }
func (r *repo) commit(msg string)         { r.git("commit", "-q", "-m", msg) }
func (r *repo) write(name, body string) {
	if r.err != nil {
		return
	}
	p := filepath.Join(r.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.err = err
		return
	}
	r.err = os.WriteFile(p, []byte(body), 0o644)
}

func (r *repo) read(name string) string {
	b, err := os.ReadFile(filepath.Join(r.dir, name))
	if err != nil && r.err == nil {
		r.err = err
	}
	return string(b)
}

// instance commits b's bug on top of good and measures its tests.
func (r *repo) instance(b Bug, good, python string) (dataset.Instance, error) {
	r.git("checkout", "-q", "--detach", good)
	src := r.read(b.File)
	if !strings.Contains(src, b.Old) {
		return dataset.Instance{}, fmt.Errorf("%s does not contain the text the bug replaces", b.File)
	}
	r.write(b.File, strings.Replace(src, b.Old, b.New, 1))
	r.git("add", "-A")
	r.commit("calc: " + b.ID)
	base := r.out("rev-parse", "HEAD")
	gold := r.run("diff", "--no-ext-diff", "--no-textconv", base, good, "--", b.File)
	test := r.read(b.TestFile)
	if !strings.Contains(test, b.TestAfter) {
		return dataset.Instance{}, fmt.Errorf("%s has no line to add the test after", b.TestFile)
	}
	r.write(b.TestFile, strings.Replace(test, b.TestAfter, b.TestAfter+b.NewTest, 1))
	testPatch := r.run("diff", "--no-ext-diff", "--no-textconv")
	before := grading.ParseUnittest(r.tests(python, b.TestFile))
	r.writeDiffApplied(gold)
	after := grading.ParseUnittest(r.tests(python, b.TestFile))
	r.git("checkout", "-q", "--", ".")
	if r.err != nil {
		return dataset.Instance{}, r.err
	}
	in := dataset.Instance{
		InstanceID: b.ID, Repo: Repo, BaseCommit: base, Patch: gold, TestPatch: testPatch,
		ProblemStatement: b.Problem, Version: "0.1", EnvironmentSetupCommit: good,
		RepoURL: r.dir, Source: dataset.Custom, CreatedAt: "2026-01-01T00:00:00Z",
	}
	for test, st := range after {
		if st != grading.Passed {
			return dataset.Instance{}, fmt.Errorf("test %s does not pass with the fix (%s)", test, st)
		}
		if before[test] == grading.Passed {
			in.PassToPass = append(in.PassToPass, test)
		} else {
			in.FailToPass = append(in.FailToPass, test)
		}
	}
	if len(in.FailToPass) == 0 {
		return dataset.Instance{}, fmt.Errorf("no test fails before the fix")
	}
	slices.Sort(in.FailToPass)
	slices.Sort(in.PassToPass)
	return in, nil
}

// tests runs the unittest file and returns its combined output (unittest
// writes its verbose report to stderr; failures are expected).
func (r *repo) tests(python, file string) string {
	cmd := exec.CommandContext(r.ctx, python, "-m", "unittest", "-v", file)
	cmd.Dir = r.dir
	out, _ := cmd.CombinedOutput()
	return string(out)
}

func (r *repo) writeDiffApplied(diff string) {
	if r.err != nil {
		return
	}
	cmd := gitcmd.Command(r.ctx, r.dir, nil, "apply", "-")
	cmd.Stdin = strings.NewReader(diff)
	if out, err := cmd.CombinedOutput(); err != nil {
		r.err = fmt.Errorf("applying the fix: %w: %s", err, out)
	}
}

func writeJSONL(path string, insts []dataset.Instance) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, in := range insts {
		if err := enc.Encode(in); err != nil {
			return err
		}
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
