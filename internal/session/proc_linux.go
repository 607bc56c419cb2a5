package session

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Thin helpers over /proc. They are best effort by nature: a process can
// exit or fork between reading and signalling, so callers loop.

// haveChildrenFiles reports whether the kernel has
// /proc/<pid>/task/<tid>/children (CONFIG_PROC_CHILDREN); some minimal
// kernels do not.
var haveChildrenFiles = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/thread-self/children")
	return err == nil
})

// childLister returns a function listing a process's children: from the
// children files of its threads, or, without them, from one scan of every
// process's parent taken now.
func childLister() func(pid int) []int {
	if haveChildrenFiles() {
		return childrenFromFiles
	}
	byParent := map[int][]int{}
	forEachPID(func(pid int) {
		if st, ok := readStat(pid); ok {
			byParent[st.ppid] = append(byParent[st.ppid], pid)
		}
	})
	return func(pid int) []int { return byParent[pid] }
}

func childrenFromFiles(pid int) []int {
	base := "/proc/" + strconv.Itoa(pid) + "/task/"
	// Fast path: a single-threaded process (bash) has one task.
	data, err := os.ReadFile(base + strconv.Itoa(pid) + "/children")
	if err != nil {
		return nil
	}
	kids := parsePIDs(data, nil)
	tasks, err := os.ReadDir(base)
	if err != nil || len(tasks) <= 1 {
		return kids
	}
	for _, t := range tasks {
		if t.Name() == strconv.Itoa(pid) {
			continue
		}
		if data, err := os.ReadFile(base + t.Name() + "/children"); err == nil {
			kids = parsePIDs(data, kids)
		}
	}
	return kids
}

// childFiles lists a process's children as childrenFromFiles does, through
// descriptors of its main thread's children file and of its task directory
// kept open: a read of each instead of two opens, two path walks through
// /proc and a sorted directory listing (~18 against ~1.3 µs a listing on a
// 2-core VM). A descriptor names the process it was opened for, never a
// later one with its pid. A session's shell keeps one (shellProc.kids).
type childFiles struct {
	children, task int
	buf            []byte
}

// openChildFiles opens pid's files, which must be those of a process
// that cannot have been reaped meanwhile (the caller's unreaped child);
// nil where they cannot be opened (list then reads them by path).
func openChildFiles(pid int) *childFiles {
	if !haveChildrenFiles() {
		return nil
	}
	base := "/proc/" + strconv.Itoa(pid) + "/task"
	ch, err := unix.Open(base+"/"+strconv.Itoa(pid)+"/children", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	task, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(ch)
		return nil
	}
	return &childFiles{children: ch, task: task, buf: make([]byte, 512)}
}

// list returns the children of pid, the process c was opened for.
func (c *childFiles) list(pid int) []int {
	if c == nil {
		return childrenFromFiles(pid)
	}
	data, ok := c.pread(c.children)
	if !ok {
		return nil
	}
	kids := parsePIDs(data, nil)
	// Threads besides the main one (bash has none) have children files of
	// their own.
	if _, err := unix.Seek(c.task, 0, io.SeekStart); err != nil {
		return kids
	}
	self := strconv.Itoa(pid)
	var names []string
	for {
		n, err := unix.ReadDirent(c.task, c.buf)
		if err != nil || n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(c.buf[:n], -1, names)
	}
	for _, t := range names {
		if t == self {
			continue
		}
		if data, err := os.ReadFile("/proc/" + self + "/task/" + t + "/children"); err == nil {
			kids = parsePIDs(data, kids)
		}
	}
	return kids
}

// pread reads all of the file fd from its start into c.buf, grown as
// needed; the bytes are good until the next read.
func (c *childFiles) pread(fd int) ([]byte, bool) {
	for {
		n, err := unix.Pread(fd, c.buf, 0)
		if err != nil {
			return nil, false
		}
		if n < len(c.buf) {
			return c.buf[:n], true
		}
		c.buf = make([]byte, 2*len(c.buf))
	}
}

func (c *childFiles) close() {
	if c != nil {
		closeFD(&c.children)
		closeFD(&c.task)
	}
}

func parsePIDs(data []byte, into []int) []int {
	for _, f := range strings.Fields(string(data)) {
		if n, err := strconv.Atoi(f); err == nil {
			into = append(into, n)
		}
	}
	return into
}

func forEachPID(fn func(pid int)) {
	d, err := os.Open("/proc")
	if err != nil {
		return
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	for _, name := range names {
		if n, err := strconv.Atoi(name); err == nil {
			fn(n)
		}
	}
}

type procStat struct {
	comm      string // the program's name; it changes when the process execs
	state     byte
	ppid      int
	sid       int    // its session's id: the pid of the session's leader
	startTime uint64 // clock ticks after boot; with pid, identifies a process
}

// readStat parses /proc/<pid>/stat.
func readStat(pid int) (procStat, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name is in parentheses and may contain anything; the
	// fields after the last ')' are well formed.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state); session is field 6, starttime field 22.
	if len(f) < 20 {
		return procStat{}, false
	}
	var st procStat
	if j := bytes.IndexByte(data, '('); j >= 0 && j < i {
		st.comm = string(data[j+1 : i])
	}
	st.state = f[0][0]
	st.ppid, _ = strconv.Atoi(f[1])
	st.sid, _ = strconv.Atoi(f[3])
	st.startTime, _ = strconv.ParseUint(f[19], 10, 64)
	return st, true
}

func alive(st procStat) bool { return st.state != 'Z' && st.state != 'X' }

// stopped: the process is stopped by a signal (or by its tracer), so it
// cannot fork until it is continued.
func stopped(st procStat) bool { return st.state == 'T' || st.state == 't' }

// procID names a process robustly against pid reuse.
type procID struct {
	pid       int
	startTime uint64
}

// userHZ is the unit of starttime in /proc/<pid>/stat; USER_HZ is 100 on
// every architecture Linux supports today.
const userHZ = 100

// bootTicks returns the current CLOCK_BOOTTIME in /proc starttime units.
func bootTicks() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano()) / uint64(time.Second/userHZ)
}

// descendants returns every descendant of the given roots (as children
// lists them), roots included, depth first.
func descendants(children func(pid int) []int, roots []int) []int {
	var out []int
	seen := map[int]bool{}
	stack := append([]int(nil), roots...)
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, p)
		stack = append(stack, children(p)...)
	}
	return out
}

// sessionProcesses returns the live processes whose initial environment
// holds MarkerEnv=marker, and, when sid > 0, those of session sid (which
// left their process group, or lost their marker, but not the session).
// A process started before the clock tick since cannot be either, and its
// environment is not read: on a busy host most processes are such.
func sessionProcesses(marker string, sid int, since uint64) []int {
	needle := []byte(MarkerEnv + "=" + marker + "\x00")
	self := os.Getpid()
	var out []int
	forEachPID(func(pid int) {
		if pid == self {
			return
		}
		st, ok := readStat(pid)
		if !ok || !alive(st) || st.startTime < since {
			return
		}
		if sid > 0 && st.sid == sid {
			out = append(out, pid)
			return
		}
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err == nil && bytes.Contains(data, needle) {
			out = append(out, pid)
		}
	})
	return out
}

func signal(pids []int, sig unix.Signal) {
	for _, p := range pids {
		if p > 1 {
			_ = unix.Kill(p, sig)
		}
	}
}

// readSyscall parses /proc/<pid>/syscall: the number of the system call the
// process is blocked in and its first argument. ok is false when the process
// is running, or the file cannot be read (no ptrace access, no such kernel
// support).
func readSyscall(pid int) (nr, arg0 uint64, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/syscall")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0, 0, false // "running", or "-1 ..." (not in a syscall)
	}
	nr, err1 := strconv.ParseUint(f[0], 10, 64)
	arg0, err2 := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return nr, arg0, true
}

// fionread returns the number of bytes waiting in the pipe fd belongs to.
func fionread(fd int) int {
	n, err := unix.IoctlGetInt(fd, unix.TIOCINQ) // FIONREAD
	if err != nil {
		return 0
	}
	return n
}

// leakedFDs returns the shell's close-on-exec descriptors numbered 10 and
// up, other than 255. When bash is idle at its prompt these can only be
// copies it saved while applying a command's redirections (bash saves them
// at 10 and up with FD_CLOEXEC) and then failed to restore because the
// command was interrupted. Descriptors a command opened itself, even
// `exec {fd}>file`, are not close-on-exec and are kept.
func leakedFDs(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	names, err := os.ReadDir(dir + "fd")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range names {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 10 || fd == 255 {
			continue
		}
		info, err := os.ReadFile(dir + "fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			v, ok := strings.CutPrefix(line, "flags:")
			if !ok {
				continue
			}
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			if err == nil && flags&unix.O_CLOEXEC != 0 {
				out = append(out, fd)
			}
			break
		}
	}
	return out
}
