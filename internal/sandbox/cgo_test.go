package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/session"
)

// TestCgoInit runs the suite's isolation checks against an init built with
// cgo (cmd/msb-sandbox with -tags msbcgo), whose runtime cannot act on all
// its threads: init then execs the supervisor rather than becoming it, and
// every guarantee must hold the same.
func TestCgoInit(t *testing.T) {
	exe := os.Getenv(cgoInitEnv) // the root run's, in its rootless rerun
	if exe == "" {
		exe = buildCgoInit(t)
	}
	rt := testRuntimeExe(t, exe)
	sb := create(t, rt, Config{HostBase: true})
	if !slices.ContainsFunc(sb.Timings(), func(p Phase) bool { return p.Name == PhaseSupRuntime }) {
		t.Fatalf("no %s phase: the cgo init did not exec the supervisor: %v", PhaseSupRuntime, sb.Timings())
	}
	// The exec keeps the tap of the sandbox's interface open: its carrier
	// stays on (off, its routes are linkdown and a CRIU restore fails).
	if sandboxIface() != nil {
		if got := mustOK(t, sb, "cat /sys/class/net/eth0/carrier"); got != "1\n" {
			t.Errorf("eth0's carrier after the supervisor's exec: %q, want 1", got)
		}
	}
	// A session opened by the create starts in the exec'd supervisor.
	ahead := create(t, rt, Config{HostBase: true, Session: &SessionStart{Name: "main"}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if res, err := ahead.SessionExec(ctx, "main", session.ExecRequest{Command: "echo ok"}); err != nil || res.Output != "ok\n" {
		t.Fatalf("the create's session: %q, %v", res.Output, err)
	}
	runSuite(t, rt, []string{"Basics", "Sessions", "SessionInterrupt", "Signals", "Escapes", "ShellTTY", "InheritedDescriptors",
		"SupervisorUnreachable", "SupervisorThreads", "FreezeWritableDir"})
	if os.Geteuid() == 0 {
		// Rootless, the writable layer is a tmpfs that only init's
		// descriptor reaches, which the exec must pass on.
		privtest.UnprivilegedEnv(t, "^TestCgoInit$", cgoInitEnv+"="+exe)
	}
}

// cgoInitEnv names, in TestCgoInit's rootless rerun, the init it built.
const cgoInitEnv = "MSB_TEST_CGO_INIT"

// buildCgoInit builds cmd/msb-sandbox with cgo in a directory every user
// can read.
func buildCgoInit(t *testing.T) string {
	goBin, err := exec.LookPath("go")
	if err != nil {
		privtest.Skip(t, "no go toolchain to build an init with cgo: %v", err)
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		privtest.Skip(t, "no C compiler to build an init with cgo: %v", err)
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		os.Chmod(d, 0o755)
	}
	exe := filepath.Join(dir, InitBinary)
	build := exec.Command(goBin, "build", "-tags", "msbcgo", "-o", exe, "github.com/minisandbox/msb/cmd/msb-sandbox")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the cgo init: %v\n%s", err, out)
	}
	return exe
}
