package sbinit

import (
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// handleSignals makes the supervisor, as PID 1, immune to signals from
// inside the sandbox and reaps orphans whenever a child exits. The kernel
// delivers a signal to the init of a PID namespace only where init has a
// handler (but for SIGKILL and SIGSTOP from the host), so a signal at its
// default action is ignored. Go installs handlers that exit on SIGTERM and
// the like, so those are set back to SIG_DFL directly (cheaper than
// os/signal, which costs about 17µs a signal), and the ones Go must keep a
// handler for are routed to a channel and dropped. SIG_DFL, not SIG_IGN:
// an ignored signal stays ignored across fork and exec, and the runtime
// sets to default in its children only the signals it has a handler for,
// so SIGHUP and SIGINT (which the runtime leaves ignored when it found
// them so: an exec'd supervisor in a cgo build, or msb started under
// nohup) and signal 34 (which it never handles) reached every process of
// the sandbox ignored; bash then shrugged off an interrupt (testSignals,
// testSessionInterrupt). os/signal keeps two threads for itself (one
// locked to watch the signal mask, one waiting for signals), taken from
// the idle ones; init calls it before it makes the spare threads, so that
// the spares stay spare (once per process: the supervisor in place calls
// it again).
func handleSignals() {
	defaultSignals()
	notifyOnce.Do(notifySignals)
}

// defaultSignals is handleSignals' first part, what the processes it
// starts inherit: the dispositions. A supervisor that starts a session's
// shell before it makes its threads (comeUp) does the rest, os/signal's
// threads among them, once that shell is forked.
func defaultSignals() { defaultsOnce.Do(setDefaults) }

var defaultsOnce, notifyOnce sync.Once

func setDefaults() {
	for sig := 1; sig <= 64; sig++ {
		switch {
		case sig == 32 || sig == 33:
			undoIgnored(sig)
		case !keepGoHandler[unix.Signal(sig)]:
			defaultSignal(sig)
		}
	}
}

func notifySignals() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, unix.SIGCHLD, unix.SIGQUIT, unix.SIGILL, unix.SIGTRAP, unix.SIGABRT,
		unix.SIGBUS, unix.SIGFPE, unix.SIGSEGV, unix.SIGSYS)
	go func() {
		for range ch {
			reapOrphans()
		}
	}()
}

// keepGoHandler are signals the Go runtime needs its own handler for:
// SIGCHLD (reaping), SIGURG (preemption), the synchronous fault signals
// (panics), SIGKILL and SIGSTOP (cannot be caught), SIGCONT/SIGWINCH/SIGTSTP
// family (harmless defaults) and SIGPROF. Signals 32 and 33 are glibc's
// in a cgo build, which keeps its handlers for them; else nobody handles
// them and one the supervisor found ignored is set to default
// (undoIgnored), as the parent of msb may have ignored it.
var keepGoHandler = map[unix.Signal]bool{
	unix.SIGCHLD: true, unix.SIGURG: true, unix.SIGKILL: true, unix.SIGSTOP: true,
	unix.SIGQUIT: true, unix.SIGILL: true, unix.SIGTRAP: true, unix.SIGABRT: true,
	unix.SIGBUS: true, unix.SIGFPE: true, unix.SIGSEGV: true, unix.SIGSYS: true,
	unix.SIGCONT: true, unix.SIGWINCH: true, unix.SIGTSTP: true, unix.SIGTTIN: true,
	unix.SIGTTOU: true, unix.SIGPROF: true,
}

// sigaction is the kernel's struct sigaction on x86_64.
type sigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

// defaultSignal sets sig to its default action (SIG_DFL) behind the
// runtime's back; whether or not the runtime counts it as its own, the
// processes the supervisor starts get SIG_DFL.
func defaultSignal(sig int) {
	act := sigaction{handler: 0} // SIG_DFL
	unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
}

// undoIgnored sets sig to SIG_DFL if it is ignored (SIG_IGN) and leaves
// a handler in place: a signal that reached msb ignored would otherwise
// reach every process of the sandbox so.
func undoIgnored(sig int) {
	var old sigaction
	_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0)
	if errno == 0 && old.handler == 1 { // SIG_IGN
		defaultSignal(sig)
	}
}

// reapOrphans reaps every zombie child of PID 1 that nobody in this process
// is waiting for. The supervisor's own children (session shells, commands)
// were started by os/exec, which holds a pidfd for each and reaps it; any
// other zombie child is an orphan the kernel reparented to init.
func reapOrphans() {
	var zombies []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == 1 {
			continue
		}
		b, err := os.ReadFile("/proc/" + p.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[0] == "Z" && f[1] == "1" {
			zombies = append(zombies, pid)
		}
	}
	if len(zombies) == 0 {
		return
	}
	held := heldPidfds()
	for _, pid := range zombies {
		if held[pid] {
			continue
		}
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	}
}

// heldPidfds returns the pids this process holds a pidfd for.
func heldPidfds() map[int]bool {
	held := map[int]bool{}
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		link, err := os.Readlink("/proc/self/fd/" + fd.Name())
		if err != nil || link != "anon_inode:[pidfd]" {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + fd.Name())
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "Pid:"); ok {
				if pid, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
					held[pid] = true
				}
			}
		}
	}
	return held
}

// spareThreads is how many OS threads the supervisor creates up front. A
// fork bomb fills the sandbox's pids limit, and threads count as pids: a Go
// runtime that then needs a thread dies. Idle threads stay parked in the
// runtime and are reused, so the supervisor keeps working under the bomb.
// Five threads are taken for good (the spawner's, os/signal's two, sysmon,
// the runtime's template thread); beyond them the runtime needs one to run
// its single P, one for each goroutine blocked in a system call (sysmon
// hands the P on to a thread that must exist) and one to take the P after
// such a hand-off. The waits of commands and sessions hold none (they wait
// in the netpoller: session's pollFor), and the requests at work are at
// most workSlots; with the orphan reaper and the trim, that is 6. Each
// spare costs ~19 kB of an idle supervisor's memory (its stacks): 12, as
// there were while every waiting command held a thread, were 0.23 MiB of
// an idle sandbox's 1.7 (docs/bench.md, 2026-12-05).
// TestSupervisorUnderFullPidsLimit holds the limit full with 16 commands
// waiting and 24 requests at once.
const spareThreads = 6

func prewarmThreads() { prewarmOnce.Do(makeSpareThreads) }

// prewarmOnce: init makes the threads, which its supervisor in place
// keeps; an exec'd one (cgo) makes its own.
var prewarmOnce sync.Once

func makeSpareThreads() {
	var ready, release sync.WaitGroup
	ready.Add(spareThreads)
	release.Add(1)
	for i := 0; i < spareThreads; i++ {
		go func() {
			runtime.LockOSThread() // forces a thread of its own
			ready.Done()
			release.Wait()
			runtime.UnlockOSThread()
		}()
	}
	ready.Wait()
	release.Done()
}

// slots is the gate (session.Gate) through which the supervisor's requests
// do their work: file operations from start to end, commands and sessions
// except while they wait for the command. A goroutine in a system call
// that lasts (20 µs or more, often under load) holds an OS thread while
// the runtime's one P moves on to another; without a bound, requests at
// once needed a thread each, more than the spare threads when a fork bomb
// fills the pids limit, and the runtime died when it could not make one
// (TestSupervisorUnderFullPidsLimit: 16 commands waiting, then 24 requests
// and the 16 commands' ends at once). Two at work lose nothing: one P runs
// them either way.
type slots chan struct{}

// workSlots is how many requests are at work at once.
const workSlots = 2

func (s slots) Enter() { s <- struct{}{} }
func (s slots) Leave() { <-s }
