package sbinit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"unsafe"

	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// Where no cgroup holds a sandbox's limits, rlimits stand in for them. They
// must not bind the supervisor (a Go runtime reserves far more address space
// than it uses, so RLIMIT_AS would kill it), only the agent's processes. So
// every process the supervisor starts goes through a tiny exec wrapper: msb
// itself in the "limits" stage, which sets the rlimits and execs the real
// program.

// StageLimits is the wrapper stage.
const StageLimits = "limits"

// Environment of the wrapper; it removes both before exec.
const (
	envLimitsExec = "MSB_LIMITS_EXEC"   // program to exec
	envLimits     = "MSB_LIMITS_RLIMIT" // JSON []wire.Rlimit
)

// wrap returns the path and environment that start prog under the
// sandbox's rlimits; without rlimits it returns them unchanged.
func (s *supervisor) wrap(prog string, env []string) (string, []string) {
	if len(s.cfg.Rlimits) == 0 {
		return prog, env
	}
	b, _ := json.Marshal(s.cfg.Rlimits)
	out := append(append([]string(nil), env...), EnvStage+"="+StageLimits, envLimitsExec+"="+prog, envLimits+"="+string(b))
	return "/proc/self/exe", out
}

// limitsMain sets the rlimits and execs the program. The wrapper's own
// address space (a Go runtime's reservations, over a GiB) is far above a
// small RLIMIT_AS, so once the limit is set it must not map anything: a
// heap growth, a new thread's stack or a GC cycle would die of "runtime:
// out of memory". Everything exec needs is made first; then, with GC off
// and on one locked thread, only raw system calls run.
func limitsMain() error {
	prog := os.Getenv(envLimitsExec)
	var rls []wire.Rlimit
	if err := json.Unmarshal([]byte(os.Getenv(envLimits)), &rls); err != nil {
		return fmt.Errorf("decoding rlimits: %w", err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvStage+"=") && !strings.HasPrefix(kv, envLimitsExec+"=") && !strings.HasPrefix(kv, envLimits+"=") {
			env = append(env, kv)
		}
	}
	argv := append([]string(nil), os.Args...)
	if argv[0] == "exe" { // named after /proc/self/exe by the caller
		argv[0] = filepath.Base(prog)
	}
	progp, err := unix.BytePtrFromString(prog)
	if err != nil {
		return fmt.Errorf("exec %s: %w", prog, err)
	}
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return fmt.Errorf("exec %s: %w", prog, err)
	}
	envp, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		return fmt.Errorf("exec %s: %w", prog, err)
	}
	lims := make([]unix.Rlimit, len(rls))
	for i, rl := range rls {
		lims[i] = unix.Rlimit{Cur: rl.Value, Max: rl.Value}
	}
	runtime.LockOSThread()
	debug.SetGCPercent(-1)
	for i, rl := range rls {
		if _, _, e := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, uintptr(rl.Resource), uintptr(unsafe.Pointer(&lims[i])), 0, 0, 0); e != 0 {
			return fmt.Errorf("setting rlimit %s=%d: %w", rl.Name, rl.Value, e)
		}
	}
	_, _, e := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(progp)), uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])))
	// The program was found but did not start: exit as a shell would (127
	// for a name that does not exist, 126 for one that cannot execute),
	// not with the stage's 125, so that msb run passes the shell's code on.
	fmt.Fprintf(os.Stderr, "msb sandbox: %s: cannot execute: %v\n", prog, e)
	if e == unix.ENOENT {
		os.Exit(127)
	}
	os.Exit(126)
	return nil
}
