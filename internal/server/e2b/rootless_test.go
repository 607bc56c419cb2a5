package e2b

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestE2BRootless reruns the tests that need no SDK as an unprivileged
// user: watchers through /proc/<init>/root, metrics and logs, auto-pause
// and auto-resume across a restart, the login
// shell, its primed shell, the base's spare and a shutdown's pauses in the
// rootless mode.
func TestE2BRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestE2B(AutoPauseRestart|AutoPauseRacesPause|BaseMode|WatchStaysInSandbox|WatchEndsWithSandbox|Logs|Metrics|ListBadQueries|LoginShell|PrimedShell|Spare|SpareYieldsRoom|ShutdownPauseTimeout|ShutdownPauseOutOfTime)$")
}

// TestE2BRootlessSDK reruns, as an unprivileged user, the SDK tests of
// what outlives a daemon: the test venv's python and this package's
// testdata are handed over by absolute path.
func TestE2BRootlessSDK(t *testing.T) {
	dir, err := filepath.Abs(testdata())
	if err != nil {
		t.Fatal(err)
	}
	env := append(rootlessPython(t), testdataEnv+"="+dir)
	privtest.UnprivilegedEnv(t, "^TestE2BShutdownPause$", env...)
}

// rootlessPython is the environment that gives an unprivileged user the
// test venv: its interpreter when every directory on the way to it is
// open to others, else (a venv of a python under /root, as pyenv makes)
// the host's python of the same version with the venv's packages on
// PYTHONPATH.
func rootlessPython(t *testing.T) []string {
	t.Helper()
	py := privtest.Python(t, "the e2b SDK (internal/server/testdata/requirements.txt)")
	out, err := exec.Command(py, "-c", `import sys, sysconfig; print("%d.%d" % sys.version_info[:2]); print(sysconfig.get_paths()["purelib"])`).Output()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(lines) != 2 {
		t.Fatalf("asking %s for its version and packages: %v %q", py, err, out)
	}
	if real, err := filepath.EvalSymlinks(py); err == nil && openToOthers(real) {
		return []string{privtest.PythonEnv + "=" + py}
	}
	host := "/usr/bin/python" + lines[0]
	if _, err := os.Stat(host); err != nil {
		privtest.Skip(t, "the test venv's python (%s) is out of an unprivileged user's reach and the host has no %s to run its packages", py, host)
	}
	return []string{privtest.PythonEnv + "=" + host, "PYTHONPATH=" + lines[1]}
}

// openToOthers says whether others may run the program at p: it and every
// directory above it have their x bit for others.
func openToOthers(p string) bool {
	for ; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if p == "/" {
			return true
		}
	}
}
