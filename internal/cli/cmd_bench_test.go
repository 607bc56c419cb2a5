package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchRunsTheBenchBinary: msb bench hands its arguments, flags
// included, to msb-bench (here built from cmd/msb-bench and found on PATH),
// whose output and exit code become msb bench's; without msb-bench it fails
// and says what to build.
func TestBenchRunsTheBenchBinary(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building msb-bench needs go: %v", err)
	}
	bin := t.TempDir()
	build := exec.Command(goBin, "build", "-o", filepath.Join(bin, BenchBinary), "github.com/minisandbox/msb/cmd/msb-bench")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/msb-bench: %v\n%s", err, out)
	}
	withBench := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}
	without := []string{"PATH=" + t.TempDir()}
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		env    []string
		args   []string
		code   int
		stdout []string // each in stdout
		stderr []string // each in stderr
	}{
		{name: "help", env: withBench, args: []string{"bench", "--help"},
			stdout: []string{"msb bench [command]", "--repo-source", "api", "eval"}},
		{name: "subcommand flags", env: withBench, args: []string{"bench", "eval", "--rounds", "0"},
			code: exitUsage, stderr: []string{"--rounds 0: at least 1"}},
		{name: "global flag before bench", env: withBench, args: []string{"--config", filepath.Join(dir, "none.yaml"), "bench", "eval", "--rounds", "0"},
			code: exitUsage, stderr: []string{"config file", "none.yaml"}},
		{name: "missing", env: without, args: []string{"bench", "--help"},
			code: exitFailure, stderr: []string{"needs the msb-bench binary", "make build", "./cmd/msb-bench"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := msb(t, dir, tc.env, tc.args...)
			r.expect(t, "msb "+strings.Join(tc.args, " "), tc.code, tc.stdout, tc.stderr)
		})
	}
}
