package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/sandbox/sbinit"
)

// mainEnv makes the test binary run msb's Main on its arguments, so that
// tests see real exit codes, stdout and stderr.
const mainEnv = "MSB_CLI_TEST_MAIN"

func TestMain(m *testing.M) {
	if sbinit.IsChild() {
		sbinit.Main()
	}
	if os.Getenv(mainEnv) == "1" {
		os.Exit(Main(os.Args[1:]))
	}
	checks := privtest.Checks{Mounts: "/" + privtest.StatePrefix(), After: removeFixture}
	if os.Getenv("MSB_DISK_DIR") == "" {
		// The msb commands' pool, checked for volumes left and removed
		// after the tests (make test gives the suite's, checked there).
		checks.PoolDir = privtest.TestPoolDir()
		os.Setenv("MSB_DISK_DIR", checks.PoolDir)
	}
	os.Exit(privtest.RunChecked(m, checks))
}

// removeFixture removes the demo project and its cache, if a test made
// them.
func removeFixture() error {
	if fixture.dir == "" {
		return nil
	}
	if err := sandbox.RemoveAll(fixture.dir); err != nil {
		return fmt.Errorf("removing the demo fixture: %w", err)
	}
	return nil
}

// result is what one msb invocation did.
type result struct {
	code           int
	stdout, stderr string
}

// expect fails t unless r exited with code and its stdout and stderr hold
// each of the strings given; what names the command in the messages.
func (r result) expect(t *testing.T, what string, code int, stdout, stderr []string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", what, r.code, code, r.stdout, r.stderr)
	}
	for _, want := range stdout {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, want := range stderr {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}

// msbCmd prepares msb with args in dir, its own state dir and cache.
func msbCmd(t *testing.T, dir string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), mainEnv+"=1", "MSB_STATE_DIR="+stateDir(t), "MSB_CACHE="+filepath.Join(t.TempDir(), "cache"), "MSB_CONFIG=")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

func run(cmd *exec.Cmd) result {
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.code = 128 + int(ws.Signal())
		}
	} else if err != nil {
		r.code = -1
		r.stderr += err.Error()
	}
	return r
}

func msb(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	return run(msbCmd(t, dir, env, args...))
}

var stateOnce sync.Map

// stateDir is a state dir for one test, checked empty afterwards.
func stateDir(t *testing.T) string {
	if d, ok := stateOnce.Load(t.Name()); ok {
		return d.(string)
	}
	d := privtest.StateDir(t)
	stateOnce.Store(t.Name(), d)
	return d
}

// fixture is the demo project, generated once per test binary, with a
// cache the first evaluation builds.
var fixture struct {
	once sync.Once
	dir  string
	gen  *demo.Generated
	err  error
}

func demoFixture(t *testing.T) (*demo.Generated, []string) {
	t.Helper()
	fixture.once.Do(func() {
		if fixture.dir, fixture.err = os.MkdirTemp("", "msb-cli-test-"); fixture.err == nil {
			fixture.gen, fixture.err = demo.Generate(context.Background(), filepath.Join(fixture.dir, "demo"))
		}
	})
	if fixture.err != nil {
		t.Fatal(fixture.err)
	}
	return fixture.gen, []string{"MSB_CACHE=" + filepath.Join(fixture.dir, "cache")}
}

// TestExitCodes checks the one exit-code map end to end, through real
// sandboxes where a command runs.
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"command's code passes through", []string{"run", "--", "sh", "-c", "exit 7"}, 7},
		{"success", []string{"run", "--memory", "256M", "--", "true"}, 0},
		{"killed by a signal", []string{"run", "--", "sh", "-c", "kill -9 $$"}, 137},
		{"missing command", []string{"run", "--", "/no/such/program"}, exitNoCommand},
		{"missing command on PATH", []string{"run", "--", "no-such-program"}, exitNoCommand},
		{"not executable", []string{"run", "--", "/etc/hostname"}, exitNotExecutable},
		{"a directory", []string{"run", "--", "/usr"}, exitNotExecutable},
		{"unknown command", []string{"bogus"}, exitUsage},
		{"unknown subcommand", []string{"cache", "bogus"}, exitUsage},
		{"version", []string{"--version"}, 0},
		{"bad size", []string{"run", "--memory", "lots", "--", "true"}, exitUsage},
		{"invalid sandbox config", []string{"run", "--layer", "relative/dir", "--", "true"}, exitInvalidConfig},
		{"unknown flag", []string{"eval", "--no-such-flag"}, exitUsage},
		{"wrong number of arguments", []string{"spec", "show"}, exitUsage},
		{"validate without dataset", []string{"validate"}, exitUsage},
		{"eval without predictions", []string{"eval", "--dataset", "x.jsonl"}, exitUsage},
		{"doctor", []string{"doctor"}, 0},
		{"gc", []string{"gc"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := msb(t, dir, nil, tc.args...); r.code != tc.want {
				t.Fatalf("msb %v exited %d, want %d\n%s%s", tc.args, r.code, tc.want, r.stdout, r.stderr)
			}
		})
	}
}

// TestCommandNotStarted: a command msb run cannot start exits as in a
// shell (127, 126) and says why.
func TestCommandNotStarted(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		code int
		say  string
	}{
		{[]string{"no-such-program"}, 127, "no-such-program: command not found"},
		{[]string{"/etc/hostname"}, 126, "/etc/hostname: cannot execute: "},
	} {
		r := msb(t, t.TempDir(), nil, append([]string{"run", "--"}, tc.argv...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.say) {
			t.Errorf("msb run -- %v: exit %d, want %d saying %q\n%s", tc.argv, r.code, tc.code, tc.say, r.stderr)
		}
	}
}

// TestCommandNotStartedRootless is TestCommandNotStarted as an
// unprivileged user: where rlimits stand in for a cgroup, the wrapper that
// sets them execs the command, and its failure must give the same codes.
func TestCommandNotStartedRootless(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the root run of this test reruns it so")
	}
	privtest.Unprivileged(t, "^TestCommandNotStarted$")
}

// TestVersion: msb --version and msb version print the build's version
// and Go's; --json gives api.Version.
func TestVersion(t *testing.T) {
	dir := t.TempDir()
	a, b := msb(t, dir, nil, "--version"), msb(t, dir, nil, "version")
	if a.code != 0 || a.stdout != b.stdout || !strings.HasPrefix(a.stdout, "msb ") || !strings.Contains(a.stdout, runtime.Version()) {
		t.Fatalf("--version %+v, version %+v", a, b)
	}
	var v api.Version
	if r := msb(t, dir, nil, "--json", "version"); json.Unmarshal([]byte(r.stdout), &v) != nil || v.Go != runtime.Version() || v.Version == "" {
		t.Fatalf("version --json: %+v", r)
	}
}

// TestNamedDirMustExist: a --cache or --state-dir named on the command
// line that does not exist is a usage error naming it, and nothing is
// made there; a command that makes a cache makes it.
func TestNamedDirMustExist(t *testing.T) {
	gen, env := demoFixture(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo")
	for _, args := range [][]string{
		{"run", "--state-dir", missing, "--", "true"},
		{"doctor", "--state-dir", missing},
		{"cache", "ls", "--cache", missing},
		{"eval", "--cache", missing, "--dataset", gen.DatasetPath, "--spec", gen.SpecPath, "--predictions", "gold", "--run-id", "x", "--out", filepath.Join(dir, "out")},
		{"validate", "--state-dir", missing, "--dataset", gen.DatasetPath, "--spec", gen.SpecPath, "--out", filepath.Join(dir, "out")},
	} {
		r := msb(t, dir, env, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, missing) || !strings.Contains(r.stderr, "does not exist") && !strings.Contains(r.stderr, "no cache at") {
			t.Errorf("msb %v: exit %d, want %d naming %s\n%s", args, r.code, exitUsage, missing, r.stderr)
		}
		if _, err := os.Stat(missing); !os.IsNotExist(err) {
			t.Fatalf("msb %v made %s", args, missing)
		}
	}
	made := filepath.Join(dir, "new-cache")
	if r := msb(t, dir, env, "cache", "build", "--cache", made, "--dataset", gen.DatasetPath, "--spec", gen.SpecPath, "--instances", "demo__calc-1"); r.code != 0 {
		t.Fatalf("cache build into a new cache: %+v", r)
	}
	if r := msb(t, dir, env, "cache", "ls", "--cache", made); r.code != 0 {
		t.Fatalf("cache ls of the cache build made: %+v", r)
	}
}

// TestJSONErrors: with --json an error is one JSON object on stderr
// (api.CLIError) whose exit code is the process's, and stdout is empty.
func TestJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code string
		exit int
	}{
		{[]string{"--json", "bogus"}, "usage", exitUsage},
		{[]string{"--json", "eval", "--no-such-flag"}, "usage", exitUsage},
		{[]string{"--json", "run", "--", "no-such-program"}, "command_not_found", exitNoCommand},
		{[]string{"--json", "spec", "show", "x", "--dataset", "/no/such.jsonl"}, "usage", exitUsage},
	} {
		r := msb(t, t.TempDir(), nil, tc.args...)
		var e api.CLIError
		dec := json.NewDecoder(strings.NewReader(r.stderr))
		if err := dec.Decode(&e); err != nil || dec.More() || e.Error.Code != tc.code || e.Error.ExitCode != r.code || r.code != tc.exit ||
			e.Error.Message == "" || r.stdout != "" {
			t.Errorf("msb %v: exit %d, stderr %q, stdout %q (%v); want one object with code %s, exit %d", tc.args, r.code, r.stderr, r.stdout, err, tc.code, tc.exit)
		}
	}
}

// TestDoctorLeavesNoPool: as root, doctor's test sandbox makes the disk
// pool in a disk dir that had none; doctor removes it again, and keeps a
// pool that was there before it ran.
func TestDoctorLeavesNoPool(t *testing.T) {
	privtest.RequireRoot(t)
	disk := t.TempDir()
	pool := filepath.Join(disk, "msb-pool")
	env := []string{sandbox.DiskDirEnv + "=" + disk}
	keepsNoPool(t, env, disk)
	if r := msb(t, t.TempDir(), env, "doctor"); r.code != 0 {
		t.Fatalf("doctor: %+v", r)
	}
	checkNoPool(t, disk, "doctor")
	// A run makes the pool and keeps it; doctor then leaves it.
	if r := msb(t, t.TempDir(), env, "run", "--host-base", "--", "true"); r.code != 0 {
		t.Fatalf("run: %+v", r)
	}
	if r := msb(t, t.TempDir(), env, "doctor"); r.code != 0 {
		t.Fatalf("doctor: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(pool, "mnt")); err != nil {
		t.Fatalf("doctor removed the pool a run had made: %v", err)
	}
}

// TestBatchReleasesItsPool: as root, eval and validate release the disk
// pool they made in a disk dir that had none (demo too: TestCacheWords),
// and keep one that was there, as msb run leaves it.
func TestBatchReleasesItsPool(t *testing.T) {
	privtest.RequireRoot(t)
	gen, env := demoFixture(t)
	disk := t.TempDir()
	env = append(env, sandbox.DiskDirEnv+"="+disk)
	keepsNoPool(t, env, disk)
	dir := t.TempDir()
	batch := func(run string) [][]string {
		sel := []string{"--dataset", gen.DatasetPath, "--spec", gen.SpecPath, "--instances", "demo__calc-1", "--out", filepath.Join(dir, "out")}
		return [][]string{
			append([]string{"validate", "--run-id", "v" + run}, sel...),
			append([]string{"eval", "--predictions", "gold", "--run-id", "e" + run}, sel...),
		}
	}
	for _, args := range batch("1") {
		if r := msb(t, dir, env, args...); r.code != 0 {
			t.Fatalf("msb %v: %+v", args, r)
		}
		checkNoPool(t, disk, args[0])
	}
	if r := msb(t, dir, env, "run", "--host-base", "--", "true"); r.code != 0 {
		t.Fatalf("run: %+v", r)
	}
	mnt := filepath.Join(disk, "msb-pool", "mnt")
	for _, args := range batch("2") {
		if r := msb(t, dir, env, args...); r.code != 0 {
			t.Fatalf("msb %v: %+v", args, r)
		}
		if len(privtest.Leaks(mnt)) == 0 {
			t.Fatalf("msb %s released the pool msb run had made", args[0])
		}
	}
}

// keepsNoPool removes the pool of disk when the test ends, whatever it
// left. Call it before any step can fail, and after the state dir's own
// cleanup, so that it runs first: the gc needs the state dir.
func keepsNoPool(t *testing.T, env []string, disk string) {
	t.Helper()
	stateDir(t)
	t.Cleanup(func() {
		if r := msb(t, t.TempDir(), env, "gc", "--disk-pool"); r.code != 0 {
			t.Errorf("gc --disk-pool: %+v", r)
		}
	})
}

// checkNoPool fails unless disk holds no disk pool, made or mounted.
func checkNoPool(t *testing.T, disk, after string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(disk, "msb-pool")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("msb %s left the disk pool it made (%v)", after, err)
	}
	if l := privtest.Leaks(disk); len(l) > 0 {
		t.Errorf("msb %s left mounts: %v", after, l)
	}
}

// TestDoctorReadable: doctor's text is lines of at most 100 columns and no
// Go value syntax; --json is one JSON document.
func TestDoctorReadable(t *testing.T) {
	r := msb(t, t.TempDir(), nil, "doctor")
	if r.code != 0 || strings.Contains(r.stdout, "map[") {
		t.Fatalf("doctor: %+v", r)
	}
	for _, l := range strings.Split(r.stdout, "\n") {
		if utf8.RuneCountInString(l) > outputWidth {
			t.Errorf("a line of %d columns: %q", utf8.RuneCountInString(l), l)
		}
	}
	var rep api.DoctorReport
	if r := msb(t, t.TempDir(), nil, "doctor", "--json"); json.Unmarshal([]byte(r.stdout), &rep) != nil || !rep.OK || len(rep.Checks) == 0 {
		t.Fatalf("doctor --json: %+v", r)
	}
	for _, c := range rep.Checks {
		if strings.Contains(c.Detail, "map[") {
			t.Errorf("check %s: %q", c.Name, c.Detail)
		}
	}
}

// TestBuildProgress: where layers are built, eval and cache build say so
// on stderr as each phase ends (a line each: stderr is not a terminal
// here), and cache build counts its instances.
func TestBuildProgress(t *testing.T) {
	gen, _ := demoFixture(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"eval", "--predictions", "gold", "--run-id", "p", "--out", filepath.Join(dir, "out")},
			[]string{"demo__calc-1: env_build done in ", "demo__calc-1: mirror done in ", "[1/1] gold demo__calc-1: resolved"}},
		{[]string{"cache", "build"}, []string{"demo__calc-1: env_build done in ", "[1/1] demo__calc-1: built"}},
	} {
		cache := t.TempDir()
		args := append(tc.args, "--dataset", gen.DatasetPath, "--spec", gen.SpecPath, "--instances", "demo__calc-1", "--cache", cache)
		r := msb(t, dir, nil, args...)
		if r.code != 0 {
			t.Fatalf("msb %v: %+v", args, r)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("msb %v: stderr lacks %q:\n%s", tc.args, w, r.stderr)
			}
		}
	}
}

// TestBadInputIsAUsageError: every input msb cannot use is refused with a
// clear message, exit 2, before any sandbox starts, and creates nothing.
func TestBadInputIsAUsageError(t *testing.T) {
	gen, env := demoFixture(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	data, err := os.ReadFile(gen.DatasetPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSpace(string(data)), "\n")
	row0 := strings.TrimSpace(lines[0])
	badJSON := write("bad-json.jsonl", string(data)+"{not json\n")
	traversal := write("traversal.jsonl", strings.Replace(row0, `"instance_id":"demo__calc-1"`, `"instance_id":"../../../../x"`, 1)+"\n")
	predsUnknown := write("unknown.jsonl", `{"instance_id": "nope", "model_name_or_path": "m", "model_patch": ""}`+"\n")
	predsNoPatch := write("nopatch.jsonl", `{"instance_id": "demo__calc-1", "model_name_or_path": "m"}`+"\n")
	predsDotDot := write("dotdot.jsonl", `{"instance_id": "demo__calc-1", "model_name_or_path": "..", "model_patch": ""}`+"\n")
	badParser := write("parser.yaml", demo.SpecYAML(gen.PyVersion)+"instances:\n  demo__calc-1:\n    log_parser: nosuchparser\n")
	ds, sp := gen.DatasetPath, gen.SpecPath
	out := filepath.Join(dir, "out")
	evalArgs := func(extra ...string) []string {
		return append([]string{"eval", "--dataset", ds, "--spec", sp, "--out", out, "--predictions", "gold", "--run-id", "r"}, extra...)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"invalid JSON line", evalArgs("--dataset", badJSON), "row 5: not a JSON object"},
		{"instance id leaving --out", []string{"validate", "--dataset", traversal, "--spec", sp, "--out", out}, "invalid name"},
		{"run id ..", evalArgs("--run-id", ".."), `--run-id ".."`},
		{"unknown --instances id", evalArgs("--instances", "demo__calc-1,nope"), "no such instance in " + ds + ": nope"},
		{"prediction for an unknown instance", evalArgs("--predictions", predsUnknown), "not in " + ds + ": nope"},
		{"prediction without model_patch", evalArgs("--predictions", predsNoPatch), "no model_patch"},
		{"model name ..", evalArgs("--predictions", predsDotDot), "invalid name"},
		{"unknown log parser", evalArgs("--spec", badParser), `unknown log parser "nosuchparser"`},
		{"missing spec file", evalArgs("--spec", filepath.Join(dir, "none.yaml")), "none.yaml"},
		{"--workers 0", evalArgs("--workers", "0"), "--workers 0"},
		{"--memory 0", evalArgs("--memory", "0"), "--memory 0"},
		{"--eval-network bridge", evalArgs("--eval-network", "bridge"), `--eval-network "bridge": use none or host`},
		{"--workers abc", evalArgs("--workers", "abc"), `--workers "abc": want a whole number`},
		{"msb run --pids 0", []string{"run", "--pids", "0", "--", "true"}, "--pids 0"},
		{"msb run --cpus 64", []string{"run", "--cpus", "64", "--", "true"}, "--cpus 64"},
		{"cache verify of no cache", []string{"cache", "verify", "--cache", filepath.Join(dir, "nonexistent")}, "no cache at"},
		{"cache du of no cache", []string{"cache", "du", "--cache", filepath.Join(dir, "nonexistent")}, "no cache at"},
		{"gc of no state dir", []string{"gc", "--state-dir", filepath.Join(dir, "nonexistent")}, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := msb(t, dir, env, tc.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("msb %v exited %d, want %d and %q:\n%s%s", tc.args, r.code, exitUsage, tc.want, r.stdout, r.stderr)
			}
			if strings.Contains(r.stderr, "strconv") {
				t.Fatalf("raw parser error: %s", r.stderr)
			}
			for _, p := range []string{out, filepath.Join(dir, "nonexistent"), filepath.Join(filepath.Dir(dir), "x")} {
				if _, err := os.Stat(p); err == nil {
					t.Fatalf("%s was created", p)
				}
			}
		})
	}
	// --skip-bad-rows runs without the bad row, and counts it.
	r := msb(t, dir, env, "eval", "--dataset", badJSON, "--spec", sp, "--out", out, "--predictions", "gold", "--run-id", "skip", "--skip-bad-rows", "--json")
	var rep api.RunReport
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rep) != nil || len(rep.Summaries) != 1 || rep.Summaries[0].SkippedRows != 1 || rep.Summaries[0].ResolvedInstances != 4 {
		t.Fatalf("--skip-bad-rows: %d %+v\n%s", r.code, rep, r.stderr)
	}
	if strings.Contains(r.stdout, "null") {
		t.Fatalf("null in JSON output:\n%s", r.stdout)
	}
	// A ref that would leave the store's refs (the cache exists now).
	r = msb(t, dir, env, "cache", "export", filepath.Join(dir, "x.zst"), "../../etc")
	if r.code != exitUsage || !strings.Contains(r.stderr, "invalid ref name") {
		t.Fatalf("bad ref: %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.zst")); err == nil {
		t.Fatal("the archive of a failed export is left")
	}
}

// TestInstanceErrors: an instance that cannot be evaluated (unknown Python
// version, unknown base commit) is an error with its full reason printed
// under the table, and exit 1; a validation with nothing valid is exit 1.
func TestInstanceErrors(t *testing.T) {
	gen, env := demoFixture(t)
	dir := t.TempDir()
	spec := filepath.Join(dir, "spec.yaml")
	os.WriteFile(spec, []byte(demo.SpecYAML(gen.PyVersion)+"instances:\n  demo__calc-1:\n    python: \"2.1\"\n"), 0o644)
	data, _ := os.ReadFile(gen.DatasetPath)
	noCommit := filepath.Join(dir, "nocommit.jsonl")
	os.WriteFile(noCommit, []byte(strings.Replace(string(data), gen.Instances[1].BaseCommit, strings.Repeat("0", 40), 1)), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unknown python", []string{"eval", "--dataset", gen.DatasetPath, "--spec", spec, "--predictions", "gold", "--run-id", "py", "--instances", "demo__calc-1"},
			[]string{"Errors:", "demo__calc-1 (gold, infra_error)", "2.1"}},
		{"unknown base commit", []string{"eval", "--dataset", noCommit, "--spec", gen.SpecPath, "--predictions", "gold", "--run-id", "c", "--instances", "demo__calc-2"},
			[]string{"Errors:", "repository unavailable", "--repo-source demo/calc=PATH_OR_URL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := msb(t, dir, env, tc.args...)
			if r.code != exitFailure {
				t.Fatalf("exit %d, want %d:\n%s%s", r.code, exitFailure, r.stdout, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, r.stdout)
				}
			}
		})
	}
	// An instance whose FAIL_TO_PASS test passes at the base commit is not
	// valid, and with nothing valid validate fails.
	easy := filepath.Join(dir, "easy.jsonl")
	os.WriteFile(easy, []byte(strings.Replace(strings.SplitN(string(data), "\n", 2)[0], `"FAIL_TO_PASS":["`, `"FAIL_TO_PASS":["test_mean (tests.test_stats.TestStats.test_mean)","`, 1)+"\n"), 0o644)
	r := msb(t, dir, env, "validate", "--dataset", easy, "--spec", gen.SpecPath, "--out", filepath.Join(dir, "v"))
	valid, _ := os.ReadFile(filepath.Join(dir, "v", "validate", "valid.json"))
	if r.code != exitFailure || !strings.Contains(r.stderr, "no instance is valid") || string(valid) != "[]" || !strings.Contains(r.stdout, "wrote "+filepath.Join(dir, "v", "validate", "valid.json")) {
		t.Fatalf("validate with nothing valid: %d %q\n%s%s", r.code, valid, r.stdout, r.stderr)
	}
}

// TestInterruptResumes: Ctrl-C stops a run with 130 and says how to go on;
// the rerun keeps what finished.
func TestInterruptResumes(t *testing.T) {
	gen, env := demoFixture(t)
	dir := t.TempDir()
	spec := filepath.Join(dir, "spec.yaml")
	os.WriteFile(spec, []byte(demo.SpecYAML(gen.PyVersion)+"instances:\n  demo__calc-4:\n    eval_commands: [\"sleep 600\"]\n"), 0o644)
	args := []string{"eval", "--dataset", gen.DatasetPath, "--spec", spec, "--predictions", "gold", "--run-id", "int", "--workers", "1", "--timeout", "20m"}
	cmd := msbCmd(t, dir, env, args...)
	var out, errb syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Three instances finish; the fourth sleeps in its tests.
	for !strings.Contains(errb.String(), "[3/4]") {
		if cmd.ProcessState != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 || !strings.Contains(errb.String(), "rerun with the same run id") {
		t.Fatalf("interrupted run: %v\n%s%s", err, out.String(), errb.String())
	}
	os.WriteFile(spec, []byte(demo.SpecYAML(gen.PyVersion)), 0o644)
	r := msb(t, dir, env, args...)
	if r.code != 0 || !strings.Contains(r.stdout, "3 results kept from an earlier run") {
		t.Fatalf("resumed run: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestShellWithoutATerminal: msb shell on a pipe runs the shell on it
// instead of waiting for a terminal.
func TestShellWithoutATerminal(t *testing.T) {
	cmd := msbCmd(t, t.TempDir(), nil, "shell")
	cmd.Stdin = strings.NewReader("echo hello from $(hostname | cut -c1-4)\nexit 3\n")
	r := run(cmd)
	if r.code != 3 || !strings.Contains(r.stdout, "hello from msb-") {
		t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestOOMKillSaysSo: a command the OOM killer ends exits 137 with a message.
func TestOOMKillSaysSo(t *testing.T) {
	privtest.RequireRoot(t) // a cgroup memory limit
	r := msb(t, t.TempDir(), nil, "run", "--memory", "64M", "--tmp", "16M", "--", "python3", "-c", "x = bytearray(512 << 20); x[::4096] = b'x' * len(x[::4096])")
	if r.code != 137 || !strings.Contains(r.stderr, "OOM killer") {
		t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestCacheWords: the cache's numbers say what they mean: unique bytes
// never above a layer's disk bytes, a dedup ratio of at least 1, an export
// that counts its layers; and the demo leaves no temp dir.
func TestCacheWords(t *testing.T) {
	gen, env := demoFixture(t)
	dir := t.TempDir()
	if r := msb(t, dir, env, "cache", "build", "--dataset", gen.DatasetPath, "--spec", gen.SpecPath); r.code != 0 || strings.ContainsAny(r.stderr, "\r\x1b") {
		t.Fatalf("build: %d %q\n%s", r.code, r.stderr, r.stdout)
	}
	var ls api.CacheListing
	r := msb(t, dir, env, "cache", "ls", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &ls); err != nil || len(ls.Layers) == 0 {
		t.Fatalf("ls: %v %s", err, r.stdout)
	}
	for _, l := range ls.Layers {
		if l.UniqueBytes > l.DiskBytes {
			t.Errorf("layer %s: %d unique of %d bytes", l.ID, l.UniqueBytes, l.DiskBytes)
		}
		if len(l.ID) != len("sha256:")+64 || len(l.Refs) == 0 {
			t.Errorf("ls --json cut layer %s: refs %v", l.ID, l.Refs)
		}
	}
	// The table fits 100 columns (digests cut, sizes short); --json has it all.
	r = msb(t, dir, env, "cache", "ls")
	for _, l := range strings.Split(r.stdout, "\n") {
		if utf8.RuneCountInString(l) > outputWidth {
			t.Errorf("cache ls: a line of %d columns: %q", utf8.RuneCountInString(l), l)
		}
	}
	var du api.CacheUsage
	if r := msb(t, dir, env, "cache", "du", "--json"); json.Unmarshal([]byte(r.stdout), &du) != nil || du.DedupRatio < 1 {
		t.Fatalf("du: %s", r.stdout)
	}
	var ex api.TransferReport
	archive := filepath.Join(dir, "c.msb.zst")
	if r := msb(t, dir, env, "cache", "export", archive, "--json"); json.Unmarshal([]byte(r.stdout), &ex) != nil || len(ex.Layers) < 2 || ex.ArchiveBytes == 0 {
		t.Fatalf("export: %s %s", r.stdout, r.stderr)
	}
	// The demo leaves nothing behind: no temp dir, and as root no disk
	// pool where there was none.
	tmp, disk := t.TempDir(), t.TempDir()
	env = append(env, "TMPDIR="+tmp, sandbox.DiskDirEnv+"="+disk)
	keepsNoPool(t, env, disk)
	if r := msb(t, dir, env, "demo"); r.code != 0 {
		t.Fatalf("demo: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Fatalf("the demo left %v in TMPDIR", ents)
	}
	checkNoPool(t, disk, "demo")
}
