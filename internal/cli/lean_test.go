package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildLean builds the lean msb (cmd/msb with -tags msblean) into a
// directory of its own, with this test binary beside it as msb-full (it
// runs Main when mainEnv is set, as msbCmd sets it): the layout make build
// gives bin/.
func buildLean(t *testing.T) (dir, lean string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building the lean msb needs go: %v", err)
	}
	dir = t.TempDir()
	lean = filepath.Join(dir, "msb")
	build := exec.Command(goBin, "build", "-tags", "msblean", "-o", lean, "github.com/minisandbox/msb/cmd/msb")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags msblean ./cmd/msb: %v\n%s", err, out)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(dir, FullBinary)); err != nil {
		t.Fatal(err)
	}
	return dir, lean
}

// TestLeanMsb: the lean msb runs sandboxes itself and hands every verb it
// does not link, with all of msb's arguments, to msb-full, whose output and
// exit code become its own; it lists the same verbs; without msb-full it
// says what to build.
func TestLeanMsb(t *testing.T) {
	binDir, lean := buildLean(t)
	dir := t.TempDir()
	leanCmd := func(t *testing.T, path string, args ...string) result {
		c := msbCmd(t, dir, []string{"PATH=" + path}, args...)
		c.Path, c.Args[0] = lean, lean
		return run(c)
	}
	sysPath := os.Getenv("PATH")

	t.Run("same help", func(t *testing.T) {
		want := msb(t, dir, nil, "--help")
		got := leanCmd(t, sysPath, "--help")
		if got.code != 0 || want.code != 0 || got.stdout != want.stdout {
			t.Fatalf("lean msb --help (exit %d) differs from the full msb's (exit %d):\n%s\n--- full:\n%s", got.code, want.code, got.stdout, want.stdout)
		}
	})

	// Only the lean msb and msb-full are where it looks, without msb-full
	// on PATH: a forwarded verb's answer is msb-full's.
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout []string // each in stdout
		stderr []string // each in stderr
	}{
		{name: "run", args: []string{"run", "--", "sh", "-c", "echo hi; exit 3"}, code: 3, stdout: []string{"hi\n"}},
		{name: "run, command not found", args: []string{"run", "--", "no-such-program"}, code: exitNoCommand},
		{name: "forwarded help", args: []string{"cache", "--help"}, stdout: []string{"msb cache [command]", "import-image"}},
		{name: "forwarded completion", args: []string{"__complete", "cache", ""}, stdout: []string{"import-image\t"}},
		{name: "forwarded usage error", args: []string{"spec", "show"}, code: exitUsage, stderr: []string{"msb spec show --help"}},
		{name: "global flag before the verb", args: []string{"--json", "validate"}, code: exitUsage, stderr: []string{`"code":"usage"`}},
		{name: "run on an image", args: []string{"run", "--image", "no/such:image", "--", "true"}, code: exitUsage, stderr: []string{"no cache at"}}, // msb-full's answer
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := leanCmd(t, t.TempDir(), tc.args...)
			r.expect(t, "lean msb "+strings.Join(tc.args, " "), tc.code, tc.stdout, tc.stderr)
		})
	}

	t.Run("without msb-full", func(t *testing.T) {
		if err := os.Remove(filepath.Join(binDir, FullBinary)); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"eval", "--help"}, {"run", "--image", "debian:bookworm", "--", "true"}} {
			r := leanCmd(t, t.TempDir(), args...)
			if r.code != exitFailure || !strings.Contains(r.stderr, "no msb-full binary") ||
				!strings.Contains(r.stderr, "make build") || !strings.Contains(r.stderr, "./cmd/msb") {
				t.Errorf("lean msb %s without msb-full: exit %d, want %d and what to build\n%s", strings.Join(args, " "), r.code, exitFailure, r.stderr)
			}
		}
		if r := leanCmd(t, t.TempDir(), "run", "--", "true"); r.code != 0 {
			t.Errorf("lean msb run without msb-full: exit %d\n%s", r.code, r.stderr)
		}
	})
}
