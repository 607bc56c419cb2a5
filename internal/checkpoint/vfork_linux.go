package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/sandbox"
	"golang.org/x/sys/unix"
)

// ErrVforkChild says that a process of the sandbox stayed a vfork child
// (started by vfork, or clone with CLONE_VM, and not yet exec'd) past
// vforkWait: its parent waits in the kernel until it execs or exits, and
// CRIU can seize neither (see FreezeForDump).
var ErrVforkChild = errors.New("a process of the sandbox is a vfork child that does not exec")

// vforkWait bounds the wait for one vfork child to exec (a variable for
// tests), and freezeForDumpWait the whole of FreezeForDump's freezes.
var vforkWait = 2 * time.Second

const freezeForDumpWait = 10 * time.Second

// FreezeForDump freezes sb (sandbox.Sandbox.Freeze) in a state that
// DumpSandbox can dump, and returns its thaw, to be called on every path
// once FreezeForDump was called, also when it failed.
//
// A freeze can catch a vfork child between its vfork and its exec: a
// shell's loop that starts a command (dash vforks each one), posix_spawn,
// Go's os/exec. Its parent, frozen in the kernel's vfork wait, cannot
// stop for ptrace until the child execs, and CRIU, which seizes both
// frozen, waits for the parent until its timeout (10 s: "Unseizable
// non-zombie ... state D"). So while such a child is frozen, the sandbox
// is thawed until that child has exec'd or ended (a fraction of a
// millisecond), then frozen again and looked at anew; a child that has
// not exec'd after vforkWait fails the freeze with ErrVforkChild, as
// does still finding one after freezeForDumpWait.
func FreezeForDump(ctx context.Context, sb *sandbox.Sandbox) (thaw func() error, err error) {
	deadline := time.Now().Add(freezeForDumpWait)
	for round := 1; ; round++ {
		thaw, err = sb.Freeze(ctx)
		if err != nil {
			return thaw, err
		}
		child, parent, err := vforkChild(sb.InitPid())
		if err != nil || child == 0 {
			return thaw, err
		}
		what := fmt.Sprintf("process %d (%s) of sandbox %s, a vfork child of %d", child, comm(child), sb.ID, parent)
		if time.Now().After(deadline) {
			return thaw, fmt.Errorf("%w: %s, still after %d freezes in %s", ErrVforkChild, what, round, freezeForDumpWait)
		}
		if err := thaw(); err != nil {
			return thaw, err
		}
		if err := waitExec(ctx, child, parent); err != nil {
			return thaw, fmt.Errorf("%s: %w", what, err)
		}
	}
}

// waitExec waits until process child no longer shares the memory of
// parent (it exec'd or ended), at most vforkWait.
func waitExec(ctx context.Context, child, parent int) error {
	end := time.Now().Add(vforkWait)
	for wait := 20 * time.Microsecond; ; wait = min(2*wait, 10*time.Millisecond) {
		same, err := sameVM(child, parent)
		if err != nil || !same {
			return err
		}
		if time.Now().After(end) {
			return fmt.Errorf("%w in %s", ErrVforkChild, vforkWait)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// The thread sleeps (not the runtime's timers, whose least
		// wait is a millisecond): a child execs in less.
		unix.Nanosleep(&unix.Timespec{Nsec: int64(wait)}, nil)
	}
}

// vforkChild returns a process of init's tree that shares the memory of
// its parent (a vfork child that has not exec'd), with that parent; 0
// when none does.
func vforkChild(init int) (child, parent int, err error) {
	tree, err := processTree(init)
	if err != nil {
		return 0, 0, err
	}
	for _, pid := range tree[1:] {
		ppid, err := parentOf(pid)
		if errors.Is(err, os.ErrNotExist) {
			continue // ended
		}
		if err != nil {
			return 0, 0, err
		}
		if same, err := sameVM(pid, ppid); err != nil {
			return 0, 0, err
		} else if same {
			return pid, ppid, nil
		}
	}
	return 0, 0, nil
}

// kcmpVM is kcmp(2)'s KCMP_VM: whether two processes share their memory.
const kcmpVM = 1

// sameVM reports whether processes a and b share their memory (kcmp(2));
// false when either has ended.
func sameVM(a, b int) (bool, error) {
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(a), uintptr(b), kcmpVM, 0, 0, 0)
	switch {
	case errno == unix.ESRCH:
		return false, nil
	case errno != 0:
		return false, fmt.Errorf("kcmp of the memory of %d and %d: %w", a, b, errno)
	}
	return r == 0, nil
}

// parentOf reads pid's parent from /proc/<pid>/stat.
func parentOf(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 2 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	return strconv.Atoi(f[1])
}

// comm is pid's command name, "" once it ended.
func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}
