package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// hostileInit is appended to the demo package's __init__.py by
// TestEvalHandsNothingOfTheCallers's model patch: whatever imports the
// package, the graded tests first, looks for descriptors it should not
// have and reads and writes through them.
const hostileInit = `
import os as _os
print("HOSTILE-RAN")
for _n in range(3, 256):
    try:
        print("LEAK", _n, open("/proc/self/fd/%d/secret" % _n).read().strip())
    except OSError:
        pass
    try:
        open("/proc/self/fd/%d/pwned" % _n, "w").write("x")
        print("WROTE", _n)
    except OSError:
        pass
`

// TestEvalHandsNothingOfTheCallers: a model patch graded by msb eval runs
// its code in the grading sandbox; a descriptor on a host dir that eval's
// caller left open (as `exec 7<dir` would) must not reach it.
func TestEvalHandsNothingOfTheCallers(t *testing.T) {
	gen, env := demoFixture(t)
	inst := gen.Instances[0]
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("HOST-SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0) // no O_CLOEXEC: msb inherits it
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)

	work := filepath.Join(t.TempDir(), "calc")
	gitRun(t, "", "clone", "-q", gen.RepoDir, work)
	gitRun(t, work, "checkout", "-q", inst.BaseCommit)
	f, err := os.OpenFile(filepath.Join(work, "calc", "__init__.py"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(hostileInit)
	f.Close()
	patch := gitRun(t, work, "diff")
	pred, _ := json.Marshal(map[string]string{"instance_id": inst.InstanceID, "model_name_or_path": "hostile", "model_patch": patch})
	preds := filepath.Join(t.TempDir(), "preds.jsonl")
	if err := os.WriteFile(preds, append(pred, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	r := msb(t, t.TempDir(), env, "eval", "--dataset", gen.DatasetPath, "--spec", gen.SpecPath, "--predictions", preds,
		"--instances", inst.InstanceID, "--run-id", "fd", "--out", out)
	log, err := os.ReadFile(filepath.Join(out, "fd", "hostile", inst.InstanceID, "test_output.txt"))
	if err != nil {
		t.Fatalf("no test log (msb eval exited %d: %s): %v", r.code, r.stderr, err)
	}
	if !strings.Contains(string(log), "HOSTILE-RAN") {
		t.Fatalf("the patch's code did not run in the graded tests, so this test shows nothing: %s", log)
	}
	if strings.Contains(string(log), "LEAK") || strings.Contains(string(log), "WROTE") {
		t.Fatalf("the grading sandbox reached the caller's descriptor %d:\n%s", fd, log)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Fatalf("the grading sandbox wrote into the host dir through descriptor %s", strconv.Itoa(fd))
	}
}

// gitRun runs git in dir and returns its output.
func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(b)
}
