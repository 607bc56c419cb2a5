package envcache

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
	"github.com/minisandbox/msb/internal/spec"
)

func testRuntimeAt(dir string) (*sandbox.Runtime, error) {
	return sandbox.NewRuntime(sandbox.RuntimeOptions{StateDir: dir})
}

func testRuntime(t testing.TB) *sandbox.Runtime {
	t.Helper()
	base := os.Getenv("MSB_TEST_STATE_BASE")
	if base == "" {
		base = os.TempDir()
	}
	dir, err := os.MkdirTemp(base, "msb-envcache-test-")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := testRuntimeAt(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return rt
}

func runCmd(t testing.TB, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// testRepo is a git repository made for a test: files files of size bytes
// in a few directories, then one commit per extra change (one file edited).
type testRepo struct {
	Path    string
	Commits []string // oldest first
}

func makeRepo(t testing.TB, files, size, commits int) testRepo {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src")
	os.MkdirAll(dir, 0o755)
	runCmd(t, dir, "git", "init", "-q", "-b", "main")
	for i := range files {
		p := filepath.Join(dir, fmt.Sprintf("pkg%d", i%8), fmt.Sprintf("mod%d.py", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		line := fmt.Sprintf("# file %d line\n", i)
		body := strings.Repeat(line, size/len(line)+1)[:size]
		os.WriteFile(p, []byte(body), 0o644)
	}
	os.WriteFile(filepath.Join(dir, "hello.py"), []byte("print('hello')\n"), 0o644)
	os.Symlink("hello.py", filepath.Join(dir, "link.py"))
	runCmd(t, dir, "git", "add", "-A")
	runCmd(t, dir, "git", "commit", "-q", "-m", "initial")
	r := testRepo{Path: dir, Commits: []string{runCmd(t, dir, "git", "rev-parse", "HEAD")}}
	for i := 1; i < commits; i++ {
		p := filepath.Join(dir, fmt.Sprintf("pkg%d", i%8), fmt.Sprintf("mod%d.py", i%max(files, 1)))
		if files == 0 {
			p = filepath.Join(dir, "hello.py")
		}
		f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
		fmt.Fprintf(f, "# change %d\n", i)
		f.Close()
		runCmd(t, dir, "git", "commit", "-q", "-am", fmt.Sprintf("change %d", i))
		r.Commits = append(r.Commits, runCmd(t, dir, "git", "rev-parse", "HEAD"))
	}
	return r
}

func (r testRepo) instance(i int) dataset.Instance {
	return dataset.Instance{
		InstanceID: fmt.Sprintf("demo__proj-%d", i), Repo: "demo/proj", BaseCommit: r.Commits[i],
		EnvironmentSetupCommit: r.Commits[0], Version: "1.0", RepoURL: r.Path,
	}
}

// makeWheelhouse builds a wheel of a tiny local project with the host's
// pip (offline: setuptools and wheel from Debian).
func makeWheelhouse(t testing.TB) string {
	t.Helper()
	proj := filepath.Join(t.TempDir(), "msbdemo")
	os.MkdirAll(filepath.Join(proj, "msbdemo"), 0o755)
	os.WriteFile(filepath.Join(proj, "setup.py"), []byte("from setuptools import setup\nsetup(name='msbdemo', version='1.2.3', packages=['msbdemo'])\n"), 0o644)
	os.WriteFile(filepath.Join(proj, "msbdemo", "__init__.py"), []byte("ANSWER = 42\n"), 0o644)
	wh := filepath.Join(t.TempDir(), "wheels")
	runCmd(t, proj, "/usr/bin/python3", "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-w", wh, ".")
	os.Chmod(filepath.Dir(wh), 0o755)
	return wh
}

func testSpec() spec.Spec {
	return spec.Spec{Repo: "demo/proj", Version: "1.0", Python: "3.11", PipPackages: []string{"msbdemo"}, Install: "echo installed > " + VenvPath + "/msb-installed"}
}

func openCache(t testing.TB, o Options) *Cache {
	t.Helper()
	if o.Dir == "" {
		o.Dir = filepath.Join(t.TempDir(), "cache")
	}
	if o.Pythons == nil {
		o.Pythons = map[string]string{"3.11": "/usr/bin/python3.11"}
	}
	o.SystemSitePackages = true
	c, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func prepare(t testing.TB, c *Cache, inst dataset.Instance, sp spec.Spec) *Prepared {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, err := c.Prepare(ctx, inst, sp, nil)
	if err != nil {
		t.Fatalf("prepare %s: %v", inst.InstanceID, err)
	}
	t.Cleanup(func() { p.Release() })
	return p
}

func sandboxOf(t testing.TB, rt *sandbox.Runtime, p *Prepared) *sandbox.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := rt.Create(ctx, p.SandboxConfig())
	if err != nil {
		t.Fatalf("create sandbox: %v", err)
	}
	t.Cleanup(func() {
		err := sb.Close()
		if err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return sb
}

func sh(t testing.TB, sb *sandbox.Sandbox, cmd string) string {
	t.Helper()
	res, err := sb.Exec(context.Background(), session.ExecRequest{Command: cmd, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("%q: %v", cmd, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%q: exit %d:\n%s", cmd, res.ExitCode, res.Output)
	}
	return strings.TrimSpace(res.Output)
}
