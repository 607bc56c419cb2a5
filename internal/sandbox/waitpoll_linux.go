package sandbox

import (
	"os"

	"golang.org/x/sys/unix"
)

// waitExit returns once process p, a child of this process, has exited;
// it is not reaped (p.Wait then returns at once). It waits in the Go
// runtime's poller, on a pidfd of p, not in waitid(2) as p.Wait does: a
// goroutine blocked in a system call holds its thread and, until the
// runtime's monitor takes it back (up to 10 ms later when the process
// was idle), one of the runtime's Ps. With GOMAXPROCS 2, the Wait of a
// sandbox just started left one P to the rest of msb, and a fork's
// copy of its parent's files, two at a time, ran one at a time
// (docs/bench.md, "Fork of a parent that wrote 8 MiB: the reset begun
// during the copy, the hash after it"). Where no pollable pidfd can be
// had (kernels before 5.10), it returns at once and p.Wait blocks as
// before.
func waitExit(p *os.Process) {
	fd, err := unix.PidfdOpen(p.Pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd") // non-blocking: in the poller
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// A pidfd is readable once its process has exited.
	rc.Read(func(uintptr) bool {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, fd, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		return err != nil || info.Signo != 0
	})
}
