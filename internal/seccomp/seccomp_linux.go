package seccomp

import (
	"fmt"
	"runtime"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Denied are the system calls that fail with EPERM inside a sandbox.
var Denied = map[string]uint32{
	"mount": unix.SYS_MOUNT, "umount2": unix.SYS_UMOUNT2, "pivot_root": unix.SYS_PIVOT_ROOT,
	"chroot": unix.SYS_CHROOT, "setns": unix.SYS_SETNS,
	"fsopen": unix.SYS_FSOPEN, "fsconfig": unix.SYS_FSCONFIG, "fsmount": unix.SYS_FSMOUNT,
	"fspick": unix.SYS_FSPICK, "move_mount": unix.SYS_MOVE_MOUNT, "open_tree": unix.SYS_OPEN_TREE,
	"mount_setattr": unix.SYS_MOUNT_SETATTR,
	"kexec_load":    unix.SYS_KEXEC_LOAD, "kexec_file_load": unix.SYS_KEXEC_FILE_LOAD,
	"bpf": unix.SYS_BPF, "keyctl": unix.SYS_KEYCTL, "add_key": unix.SYS_ADD_KEY, "request_key": unix.SYS_REQUEST_KEY,
	"init_module": unix.SYS_INIT_MODULE, "finit_module": unix.SYS_FINIT_MODULE, "delete_module": unix.SYS_DELETE_MODULE,
	"clock_settime": unix.SYS_CLOCK_SETTIME, "clock_adjtime": unix.SYS_CLOCK_ADJTIME,
	"settimeofday": unix.SYS_SETTIMEOFDAY, "adjtimex": unix.SYS_ADJTIMEX,
	"ptrace": unix.SYS_PTRACE, "process_vm_readv": unix.SYS_PROCESS_VM_READV, "process_vm_writev": unix.SYS_PROCESS_VM_WRITEV,
	"perf_event_open": unix.SYS_PERF_EVENT_OPEN, "userfaultfd": unix.SYS_USERFAULTFD,
	"swapon": unix.SYS_SWAPON, "swapoff": unix.SYS_SWAPOFF, "reboot": unix.SYS_REBOOT,
	"open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT, "name_to_handle_at": unix.SYS_NAME_TO_HANDLE_AT,
	"acct": unix.SYS_ACCT, "quotactl": unix.SYS_QUOTACTL, "syslog": unix.SYS_SYSLOG,
	"iopl": unix.SYS_IOPL, "ioperm": unix.SYS_IOPERM, "lookup_dcookie": unix.SYS_LOOKUP_DCOOKIE,
	"vhangup": unix.SYS_VHANGUP, "uselib": unix.SYS_USELIB, "kcmp": unix.SYS_KCMP,
}

const (
	auditArchX8664 = 0xc000003e
	x32SyscallBit  = 0x40000000
	retAllow       = unix.SECCOMP_RET_ALLOW
	retEPERM       = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retENOSYS      = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	// offsets in struct seccomp_data
	offNr   = 0
	offArch = 4
	offArg0 = 16 // low 32 bits on little-endian
)

// namespaceFlags are the clone/unshare flags that create namespaces.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

// Program is a compiled filter.
type Program []unix.SockFilter

// Build compiles the sandbox filter.
func Build() Program {
	const (
		ldW   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeqK  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jgeK  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jsetK = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
	)
	p := Program{
		stmt(ldW, offArch),
		jump(jeqK, auditArchX8664, 1, 0),
		stmt(ret, retEPERM),
		stmt(ldW, offNr),
		jump(jgeK, x32SyscallBit, 0, 1),
		stmt(ret, retEPERM),
		jump(jeqK, unix.SYS_CLONE3, 0, 1),
		stmt(ret, retENOSYS),
	}
	// clone and unshare: refuse namespace flags in argument 0.
	for _, nr := range []uint32{unix.SYS_CLONE, unix.SYS_UNSHARE} {
		p = append(p,
			jump(jeqK, nr, 0, 4),
			stmt(ldW, offArg0),
			jump(jsetK, namespaceFlags, 0, 1),
			stmt(ret, retEPERM),
			stmt(ret, retAllow),
		)
	}
	for _, nr := range sortedDenied() {
		p = append(p, jump(jeqK, nr, 0, 1), stmt(ret, retEPERM))
	}
	return append(p, stmt(ret, retAllow))
}

func sortedDenied() []uint32 {
	out := make([]uint32, 0, len(Denied))
	for _, nr := range Denied {
		out = append(out, nr)
	}
	slices.Sort(out)
	return out
}

// Install sets no_new_privs and installs p on every thread of the calling
// process (SECCOMP_FILTER_FLAG_TSYNC, which also carries no_new_privs to the
// other threads), so children inherit both whichever thread forks them.
func Install(p Program) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	prog := unix.SockFprog{Len: uint16(len(p)), Filter: &p[0]}
	_, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(p)
	if e != 0 {
		return fmt.Errorf("installing seccomp filter (%d instructions): %w", len(p), e)
	}
	return nil
}
