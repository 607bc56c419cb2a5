package bench

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RoundRobin makes a benchmark started under SCHED_FIFO (`chrt -f`) run
// under SCHED_RR at the same priority instead: it switches the calling
// thread and re-executes the program, so that every thread of the new
// process, and every process it starts (the contenders: sandboxes,
// podman, the paper's pipeline), inherits SCHED_RR. Under any other
// policy it returns nil and changes nothing; it returns only on failure.
//
// Why: the Go runtime has waits that spin until another thread of the
// same process has done something, and count on the kernel to let that
// thread run. Under SCHED_FIFO a thread runs until it blocks, so with
// every thread FIFO at one priority on 2 CPUs, two such spinners hold
// both CPUs and the threads they wait for stay queued behind them for
// good. Seen 3 times in ~350 runs of `chrt -f 10 msb-bench sandbox`
// (docs/bench.md): the benchmark's background sweeper looping while
// another sweeper's thread was queued behind it on its CPU, and a
// sandbox's init in syscall.AllThreadsSyscall yielding until its other
// threads, queued behind the sweeper, ran the call. SCHED_RR gives
// threads of one priority a time slice each (100 ms by default), so the
// queued thread runs and the spin ends; against every other task the
// priority is the same as FIFO's.
func RoundRobin() error {
	policy, _, errno := syscall.RawSyscall(unix.SYS_SCHED_GETSCHEDULER, 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("sched_getscheduler: %w", errno)
	}
	if policy&^unix.SCHED_RESET_ON_FORK != unix.SCHED_FIFO {
		return nil
	}
	var prio int32 // struct sched_param
	// The main goroutine may move between threads; the one switched
	// must be the one that executes.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if _, _, errno := syscall.RawSyscall(unix.SYS_SCHED_GETPARAM, 0, uintptr(unsafe.Pointer(&prio)), 0); errno != 0 {
		return fmt.Errorf("sched_getparam: %w", errno)
	}
	rr := unix.SCHED_RR | policy&unix.SCHED_RESET_ON_FORK
	if _, _, errno := syscall.RawSyscall(unix.SYS_SCHED_SETSCHEDULER, 0, rr, uintptr(unsafe.Pointer(&prio))); errno != 0 {
		return fmt.Errorf("sched_setscheduler SCHED_RR %d: %w", prio, errno)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	return fmt.Errorf("re-executing under SCHED_RR: %w", syscall.Exec(exe, os.Args, os.Environ()))
}
