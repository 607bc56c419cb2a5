package task

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
	"github.com/minisandbox/msb/internal/spec"
)

// langProject is a small project of one language the test generates: its
// base files, the test patch's new files and the fix's files, the spec
// that builds and tests it, and the Multi-SWE-bench row's tests.
type langProject struct {
	name          string
	base, tests   map[string]string
	fix           map[string]string
	spec          string // the repos."*" entry of a spec file
	p2p, f2p      []string
	testRunFailed []string // what the parser reads as failed with the test patch only
	// built is in the gold evaluation's log: what proves the toolchain and
	// the dependencies were there offline.
	built string
}

// goProject: a module with one dependency (go-cmp, fetched by the install
// step with the build network, read offline by the evaluation) whose Add
// subtracts; TestMul passes throughout, the test patch's TestAdd fails
// until the fix. It has no go.sum, as sum.golang.org, which go would then
// ask, is not reachable here (a real repository commits its go.sum). Its
// Makefile, which go test ignores, is the one TestEvaluateIntegrityBaseFiles
// runs the tests with (the same environment).
var goProject = langProject{
	name: "gocalc",
	base: map[string]string{
		"Makefile": "build:\n\tgo build ./...\n\ntest:\n\tgo test -v -count=1 ./...\n\t@echo done\n",
		"go.mod":   "module calc\n\ngo 1.22\n\nrequire github.com/google/go-cmp v0.6.0\n",
		"calc.go":  "package calc\n\nfunc Add(a, b int) int { return a - b }\n\nfunc Mul(a, b int) int { return a * b }\n",
		"mul_test.go": "package calc\n\nimport (\n\t\"testing\"\n\n\t\"github.com/google/go-cmp/cmp\"\n)\n\n" +
			"func TestMul(t *testing.T) {\n\tif d := cmp.Diff(6, Mul(2, 3)); d != \"\" {\n\t\tt.Fatal(d)\n\t}\n}\n",
	},
	tests: map[string]string{"add_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(Add(2, 3))\n\t}\n}\n"},
	fix:   map[string]string{"calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n\nfunc Mul(a, b int) int { return a * b }\n"},
	spec: `      language: go
      toolchains: [go]
      install: go mod tidy && go test -count=1 -run '^$' ./...
      test_cmd: go test -v -count=1 ./...
      log_parser: multiswe/gotest
      directives: none
      env: {GOSUMDB: "off"}
`,
	p2p: []string{"TestMul"}, f2p: []string{"TestAdd"}, testRunFailed: []string{"TestAdd", "calc"}, built: "ok  \tcalc",
}

// rustProject: a crate with one crates.io dependency (itoa), fetched by
// the install step with the build network and compiled offline by the
// evaluation; add subtracts until the fix.
var rustProject = langProject{
	name: "rustcalc",
	base: map[string]string{
		"Cargo.toml": "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nitoa = \"=1.0.11\"\n",
		".gitignore": "/target\n",
		"src/lib.rs": "pub fn add(a: i64, b: i64) -> i64 {\n    a - b\n}\n\npub fn show(n: i64) -> String {\n    itoa::Buffer::new().format(n).to_string()\n}\n\n" +
			"#[cfg(test)]\nmod tests {\n    #[test]\n    fn show_works() {\n        assert_eq!(super::show(42), \"42\");\n    }\n}\n",
	},
	tests: map[string]string{"tests/add.rs": "#[test]\nfn add_works() {\n    assert_eq!(calc::show(calc::add(2, 3)), \"5\");\n}\n"},
	fix: map[string]string{"src/lib.rs": "pub fn add(a: i64, b: i64) -> i64 {\n    a + b\n}\n\npub fn show(n: i64) -> String {\n    itoa::Buffer::new().format(n).to_string()\n}\n\n" +
		"#[cfg(test)]\nmod tests {\n    #[test]\n    fn show_works() {\n        assert_eq!(super::show(42), \"42\");\n    }\n}\n"},
	spec: `      language: rust
      toolchains: [rust]
      install: cargo fetch
      test_cmd: cargo test --no-fail-fast
      log_parser: multiswe/cargo
      directives: none
`,
	p2p: []string{"tests::show_works"}, f2p: []string{"add_works"}, testRunFailed: []string{"add_works"}, built: "Compiling itoa v1.0.11",
}

var (
	langOnce  sync.Once
	langCache *envcache.Cache
	langErr   error
)

// langEnv is the task fixture's runtime with a cache of its own that has
// the build network (the dependency steps fetch from the registries) and
// finds toolchains as the CLI does: PATH and MSB_TOOLCHAIN_<NAME>.
func langEnv(t *testing.T) Env {
	t.Helper()
	f := newFixture(t)
	langOnce.Do(func() {
		langCache, langErr = envcache.Open(envcache.Options{Dir: filepath.Join(gen.Dir(), "cache-languages"), Runtime: f.env.Runtime,
			BuildNetwork: true, Toolchains: envcache.ToolchainSearchFromEnv(os.Getenv)})
	})
	if langErr != nil {
		t.Fatal(langErr)
	}
	return Env{Runtime: f.env.Runtime, Cache: langCache}
}

// TestLanguages builds a Go module and a Rust crate as Multi-SWE-bench rows
// on the host's toolchains and evaluates each with its gold patch
// (resolved) and an empty patch (not resolved), in sandboxes without
// network.
func TestLanguages(t *testing.T) {
	testLangProjects(t, langEnv(t), goProject, rustProject)
}

// TestGoBuildCacheKept: go in a task sandbox leaves the install layer's
// build cache as the layer has it. go marks each cache entry it uses by
// rewriting its mtime once the entry is an hour old, which in a sandbox
// copies the entry up; the install layer dates its entries in the future
// (envcache's goCacheMtime), so that go rewrites none of them.
func TestGoBuildCacheKept(t *testing.T) {
	_, tk := goProject.task(t)
	sb, err := Open(context.Background(), langEnv(t), tk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	// A build whose every step the cache holds reads entries and writes
	// none (a go test would also put its vet and test results again).
	// Then the layer's entries whose mtime go rewrote: older than 2099
	// (trim.txt, go's note of its last trim, is rewritten by design).
	res, err := sb.Exec(context.Background(), session.ExecRequest{Timeout: 10 * time.Minute, Command: `set -e; cd /testbed; c=$(go env GOCACHE)
find "$c" -type f ! -name trim.txt | sort > /tmp/layer-entries
test -s /tmp/layer-entries
go build ./...
find "$c" -type f ! -newermt 2099-01-01 | sort | comm -12 - /tmp/layer-entries | wc -l`})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("go test in the sandbox: %v, exit %d:\n%s", err, res.ExitCode, res.Output)
	}
	if got := strings.TrimSpace(res.Output); got != "0" {
		t.Errorf("go rewrote the mtime of %s of the install layer's build cache entries, want none", got)
	}
}

// testLangProjects evaluates each project's row with its gold patch
// (resolved) and an empty patch (not resolved); the gold run's log must
// show what the project says proves its build.
func testLangProjects(t *testing.T, env Env, projects ...langProject) {
	for _, p := range projects {
		t.Run(p.name, func(t *testing.T) {
			in, tk := p.task(t)
			gradeGoldAndEmpty(t, env, tk, in, func(want api.Outcome, ev Evaluation) {
				out := ev.Artifacts.TestOutput
				if !strings.Contains(out, p.f2p[0]) || want == api.OutcomeResolved && !strings.Contains(out, p.built) {
					t.Fatalf("test output, want %q:\n%s", p.built, out)
				}
			})
		})
	}
}

// gradeGoldAndEmpty evaluates in's gold patch, which must resolve, and an
// empty one, which must not, and hands each evaluation to check.
func gradeGoldAndEmpty(t *testing.T, env Env, tk *Task, in dataset.Instance, check func(want api.Outcome, ev Evaluation)) {
	t.Helper()
	o := EvalOptions{TestTimeout: 10 * time.Minute, GradeEmpty: true}
	for _, tc := range []struct {
		patch string
		want  api.Outcome
	}{{in.Patch, api.OutcomeResolved}, {"", api.OutcomeUnresolved}} {
		ev := Evaluate(context.Background(), env, tk, api.Prediction{InstanceID: in.InstanceID, Model: "m", ModelPatch: ptr(tc.patch)}, o)
		if ev.Result.Outcome != tc.want {
			t.Fatalf("patch %.40q: outcome %s (%s), want %s; log:\n%s\n%s", tc.patch, ev.Result.Outcome, ev.Result.Detail, tc.want, ev.Artifacts.RunLog, ev.Artifacts.TestOutput)
		}
		check(tc.want, ev)
	}
}

// TestLanguageOfflineBuild: a cache without the build network builds the
// Go module's and the Rust crate's dependency steps offline, from what the
// online cache's builds kept in the download cache they share. The online
// builds are TestLanguages' (layers the online cache already has when it
// ran first); their evaluations are its, not repeated here.
func TestLanguageOfflineBuild(t *testing.T) {
	online := langEnv(t)
	for _, p := range []langProject{goProject, rustProject} {
		prepareLang(t, online, p)
	}
	offline, err := envcache.Open(envcache.Options{Dir: filepath.Join(gen.Dir(), "cache-offline"), Runtime: online.Runtime,
		DownloadCache: filepath.Join(gen.Dir(), "cache-languages", "downloads"), Toolchains: envcache.ToolchainSearchFromEnv(os.Getenv)})
	if err != nil {
		t.Fatal(err)
	}
	testLangProjects(t, Env{Runtime: online.Runtime, Cache: offline}, goProject, rustProject)
}

// prepareLang builds p's row's layers in env's cache (its dependency step
// fills the download cache) and leases them only for the call.
func prepareLang(t *testing.T, env Env, p langProject) {
	t.Helper()
	_, tk := p.task(t)
	prep, err := env.Cache.Prepare(context.Background(), tk.Instance, tk.Spec, nil)
	if err != nil {
		t.Fatalf("building %s online: %v", p.name, err)
	}
	if err := prep.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestLanguageBadInput: an unknown language is refused when the task is
// made; a toolchain the host lacks fails the evaluation as an
// infrastructure problem that names it and how to provide it.
func TestLanguageBadInput(t *testing.T) {
	in := goProject.row(t)
	bad := strings.Replace(goProject.spec, "language: go", "language: cobol", 1)
	ov, err := spec.ParseOverrides([]byte("version: 1\nrepos:\n  " + in.Repo + ":\n    \"*\":\n" + bad))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(in, ov); !errors.Is(err, spec.ErrInvalidSpec) || !strings.Contains(err.Error(), `"cobol"`) {
		t.Fatalf("unknown language: err = %v", err)
	}
	f := newFixture(t)
	cache, err := envcache.Open(envcache.Options{Dir: filepath.Join(t.TempDir(), "cache"), Runtime: f.env.Runtime,
		Toolchains: envcache.ToolchainSearch{Path: []string{t.TempDir()}}})
	if err != nil {
		t.Fatal(err)
	}
	ov, err = spec.ParseOverrides([]byte("version: 1\nrepos:\n  " + in.Repo + ":\n    \"*\":\n" + goProject.spec))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := New(in, ov)
	if err != nil {
		t.Fatal(err)
	}
	ev := Evaluate(context.Background(), Env{Runtime: f.env.Runtime, Cache: cache}, tk, api.Prediction{InstanceID: in.InstanceID, Model: "m", ModelPatch: ptr(in.Patch)}, EvalOptions{TestTimeout: time.Minute})
	if ev.Result.Outcome != api.OutcomeInfraError || !strings.Contains(ev.Result.Detail, "MSB_TOOLCHAIN_GO") {
		t.Fatalf("missing toolchain: outcome %s (%s)", ev.Result.Outcome, ev.Result.Detail)
	}
}

// TestRootlessLanguages reruns the language tests (TestLanguages,
// TestLanguageOfflineBuild, TestLanguagesMore, TestMultilingualRow,
// TestGradleCanary) as an unprivileged user, in one process: they share
// its language cache, as they do as root. The Rust toolchain is the
// caller's rustup sysroot, under root's home, which that user cannot read:
// the rerun gets a hard-linked copy of it through MSB_TOOLCHAIN_RUST, as a
// user would give one; the JDK, Maven, Gradle, Node, GCC and Go are
// readable by anyone.
func TestRootlessLanguages(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: TestLanguages covers the rootless mode")
	}
	privtest.UnprivilegedEnv(t, "^(TestLanguages|TestLanguageOfflineBuild|TestLanguagesMore|TestMultilingualRow|TestGradleCanary)$", rustToolchainEnv(t)...)
}

// rustToolchainEnv is MSB_TOOLCHAIN_RUST naming a hard-linked copy of the
// rustup sysroot, removed when t ends; none without rustc on PATH (the
// rerun's TestLanguages then fails on the missing toolchain, as root's
// does).
func rustToolchainEnv(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("rustc", "--print", "sysroot").Output()
	if err != nil {
		t.Logf("no rustc on PATH: %v", err)
		return nil
	}
	dir, err := os.MkdirTemp("", "msb-rust-toolchain-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	rust := filepath.Join(dir, "rust")
	if out, err := exec.Command("cp", "-al", strings.TrimSpace(string(out)), rust).CombinedOutput(); err != nil {
		t.Fatalf("linking the rust toolchain: %v: %s", err, out)
	}
	return []string{envcache.ToolchainEnvVar("rust") + "=" + rust}
}

// row generates p's repository (a base commit, then the test patch and
// the fix as later commits) and its Multi-SWE-bench row. The commits are
// dated alike on every call (rowDate), so that every row of a project has
// the same commits and, in one cache, the same repository and install
// layers: a project's dependency step is built once per cache, not once
// per test.
func (p langProject) row(t *testing.T) dataset.Instance {
	t.Helper()
	return p.rowOf(t, "msbtest", p.name, 1)
}

// task is p's row (row) and the task of it under p's spec.
func (p langProject) task(t *testing.T) (dataset.Instance, *Task) {
	t.Helper()
	in := p.row(t)
	ov, err := spec.ParseOverrides([]byte("version: 1\nrepos:\n  " + in.Repo + ":\n    \"*\":\n" + p.spec))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := New(in, ov)
	if err != nil {
		t.Fatal(err)
	}
	return in, tk
}

// rowDate is the date of every commit row makes.
const rowDate = "2026-01-02T03:04:05Z"

// rowGit runs git in dir, committing as rows do (dated rowDate), and
// returns its output; a failure fails the test.
func rowGit(t *testing.T, dir string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "GIT_AUTHOR_DATE="+rowDate, "GIT_COMMITTER_DATE="+rowDate)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}
}

// rowOf is row as pull request number of repository org/name, whose
// built-in spec (spec.MultiSWEBuiltin) the row then gets.
func (p langProject) rowOf(t *testing.T, org, name string, number int64) dataset.Instance {
	t.Helper()
	dir := filepath.Join(t.TempDir(), p.name)
	git := rowGit(t, dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git("init", "-q", "-b", "main")
	writeFiles(t, dir, p.base)
	git("add", "-A")
	git("commit", "-q", "-m", "base")
	base := strings.TrimSpace(git("rev-parse", "HEAD"))
	writeFiles(t, dir, p.tests)
	git("add", "-A")
	git("commit", "-q", "-m", "tests")
	testPatch := git("diff", base, "HEAD")
	writeFiles(t, dir, p.fix)
	git("commit", "-q", "-am", "fix")
	fixPatch := git("diff", "HEAD~1", "HEAD")

	m := &dataset.MultiSWE{Org: org, Name: name, Number: number,
		P2P: map[string]dataset.Transition{}, F2P: map[string]dataset.Transition{},
		Run:       &dataset.RunResult{Passed: p.p2p},
		TestPatch: &dataset.RunResult{Passed: p.p2p, Failed: p.testRunFailed},
		FixPatch:  &dataset.RunResult{Passed: append(append([]string{}, p.p2p...), p.f2p...)},
	}
	for _, n := range p.p2p {
		m.P2P[n] = dataset.Transition{Run: "PASS", Test: "PASS", Fix: "PASS"}
	}
	for _, n := range p.f2p {
		m.F2P[n] = dataset.Transition{Run: "NONE", Test: "FAIL", Fix: "PASS"}
	}
	return dataset.Instance{InstanceID: fmt.Sprintf("%s__%s-%d", org, name, number), Repo: org + "/" + name, BaseCommit: base,
		Patch: fixPatch, TestPatch: testPatch, FailToPass: p.f2p, PassToPass: p.p2p,
		Source: dataset.MultiSWEBench, RepoURL: dir, MultiSWE: m}
}

// TestEvalEnv: the eval script exports the spec's env with its eval_env
// set over it, before the eval steps.
func TestEvalEnv(t *testing.T) {
	in := goProject.row(t)
	withEnv := strings.Replace(goProject.spec, `env: {GOSUMDB: "off"}`, `env: {GOFLAGS: -mod=readonly, KEEP: "a b"}`, 1)
	ov, err := spec.ParseOverrides([]byte("version: 1\nrepos:\n  " + in.Repo + ":\n    \"*\":\n" + withEnv + "      eval_env: {GOFLAGS: -mod=mod}\n"))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := New(in, ov)
	if err != nil {
		t.Fatal(err)
	}
	script := EvalScript(tk)
	if !strings.Contains(script, "export GOFLAGS=-mod=mod\nexport KEEP='a b'\n") || strings.Contains(script, "readonly") {
		t.Fatalf("eval script:\n%s", script)
	}
}

// TestLanguageNetworkSwitches: a language task's sandbox without network
// keeps cargo, Go and npm offline; one given the host's network (validate's
// recheck of a gold patch that adds a dependency) lets them fetch, through
// a registry proxy of its own, and keeps Go's -mod=mod. There cargo
// fetches a crate its layer lacks: the layer names crates.io by the
// proxy's registry (regproxy.CargoHost), which only the proxy answers.
func TestLanguageNetworkSwitches(t *testing.T) {
	env := langEnv(t)
	open := func(p langProject, net string) *Sandbox {
		t.Helper()
		_, tk := p.task(t)
		sb, err := Open(context.Background(), env, tk, Options{Network: net})
		if err != nil {
			t.Fatal(err)
		}
		return sb
	}
	for net, want := range map[string]string{
		sandbox.NetworkNone: "off|true|true|-mod=mod",
		sandbox.NetworkHost: "proxy|||-mod=mod",
	} {
		sb := open(goProject, net)
		res, err := sb.Exec(context.Background(), session.ExecRequest{Timeout: time.Minute,
			Command: `case $GOPROXY in http://127.0.0.1:*/go) p=proxy;; *) p=$GOPROXY;; esac; echo "$p|$CARGO_NET_OFFLINE|$npm_config_offline|$GOFLAGS"`})
		sb.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(res.Output); got != want {
			t.Errorf("network %s: GOPROXY|CARGO_NET_OFFLINE|npm_config_offline|GOFLAGS = %q, want %q", net, got, want)
		}
	}

	sb := open(rustProject, sandbox.NetworkHost)
	defer sb.Close()
	res, err := sb.Exec(context.Background(), session.ExecRequest{Timeout: 5 * time.Minute,
		Command: `cd /testbed && echo 'ryu = "=1.0.18"' >> Cargo.toml && cargo fetch 2>&1`})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("cargo fetch of a new crate with the host's network: %v, exit %d:\n%s", err, res.ExitCode, res.Output)
	}
}
