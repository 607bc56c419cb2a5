package sbinit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/minisandbox/msb/internal/sandbox/wire"
	"github.com/minisandbox/msb/internal/seccomp"
	"golang.org/x/sys/unix"
)

// keptCaps are the capabilities processes in a sandbox keep: what a root
// user needs to own and manage files and processes in its own tree, and
// nothing that reaches the kernel or other namespaces.
var keptCaps = map[int]bool{
	unix.CAP_CHOWN: true, unix.CAP_DAC_OVERRIDE: true, unix.CAP_FOWNER: true, unix.CAP_FSETID: true,
	unix.CAP_KILL: true, unix.CAP_SETGID: true, unix.CAP_SETUID: true, unix.CAP_SETPCAP: true,
	unix.CAP_NET_BIND_SERVICE: true, unix.CAP_AUDIT_WRITE: true,
}

// harden restricts the supervisor, and so everything it starts: the
// sandbox user, no_new_privs and seccomp (rlimits bind only what it starts,
// see wrap). The capability bounding set
// was already cut by init (dropBoundingCaps) before it started the
// supervisor.
func harden(cfg *wire.Config) error {
	if cfg.UID != 0 || cfg.GID != 0 {
		if err := switchUser(cfg.UID, cfg.GID); err != nil {
			return err
		}
	}
	return seccomp.Install(seccomp.Build())
}

// dropBoundingCaps removes every capability but keptCaps from the calling
// thread's bounding set. Init calls it on the locked thread that then forks
// the supervisor, which inherits the cut set process-wide (prctl acts on
// one thread, and Go's all-threads syscall is unavailable with cgo).
func dropBoundingCaps() error {
	last, err := lastCap()
	if err != nil {
		return err
	}
	for c := 0; c <= last; c++ {
		if keptCaps[c] {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	return nil
}

// switchUser makes every thread of the supervisor run as uid:gid.
func switchUser(uid, gid int) error {
	if err := syscall.Setgroups(nil); err != nil && err != syscall.EPERM {
		return fmt.Errorf("clearing supplementary groups: %w", err)
	}
	if err := syscall.Setresgid(gid, gid, gid); err != nil {
		return fmt.Errorf("setting gid %d: %w", gid, err)
	}
	if err := syscall.Setresuid(uid, uid, uid); err != nil {
		return fmt.Errorf("setting uid %d: %w", uid, err)
	}
	return nil
}

func lastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, fmt.Errorf("reading cap_last_cap: %w", err)
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
