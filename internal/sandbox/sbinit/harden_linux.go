package sbinit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

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
// was already cut by init (dropBoundingCaps) before it became the
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
// thread's bounding set: init's locked thread, from which every process of
// the sandbox is forked (see spawner), or which execs the supervisor.
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

// limitCaps leaves every thread of the runtime keptCaps as its effective
// and permitted capabilities and none inheritable, with one
// syscall.AllThreadsSyscall. It reports
// false, and changes nothing, where the runtime cannot do that: in a
// binary built with cgo, whose threads it does not all own.
func limitCaps() (bool, error) {
	var kept uint64
	for c := range keptCaps {
		kept |= 1 << c
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{
		{Effective: uint32(kept), Permitted: uint32(kept), Inheritable: 0},
		{Effective: uint32(kept >> 32), Permitted: uint32(kept >> 32), Inheritable: 0},
	}
	_, _, errno := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	switch errno {
	case 0:
		return true, nil
	case syscall.ENOTSUP:
		return false, nil
	}
	return false, fmt.Errorf("limiting the supervisor's capabilities: %w", errno)
}

// switchUser makes every thread of the supervisor run as uid:gid. The
// change of user clears the parent-death signal, which this (the spawner's
// locked) thread sets again: the sandbox still dies with its msb.
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
	return setParentDeathSignal()
}

// setParentDeathSignal has the kernel kill the calling thread's process
// when its parent (msb) dies.
func setParentDeathSignal() error {
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("setting the parent-death signal: %w", err)
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
