package session

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// shellProc is a started shell and the means to learn, through poll(2), that
// it exited.
type shellProc struct {
	cmd *exec.Cmd
	pid int
	// exitFD becomes readable when the shell exits: a pidfd, or, on kernels
	// without pidfd_open, the read end of a pipe written after cmd.Wait.
	exitFD int
	exitW  int // fallback pipe's write end, else -1

	waitOnce sync.Once
	done     chan struct{} // closed once the shell is reaped
	state    *os.ProcessState
	reaped   atomic.Bool // the pid may be reused: do not signal it
	// startTime is the shell's start (/proc starttime), before which none
	// of its processes started; 0 if unknown.
	startTime uint64
	// kids lists a session's shell's children, through descriptors of its
	// /proc entries kept open: every command reads them
	// (Session.childrenIDs); nil for RunOnce's shell.
	kids *childFiles
}

func startShell(cmd *exec.Cmd, start func(*exec.Cmd) error) (*shellProc, error) {
	if err := start(cmd); err != nil {
		return nil, err
	}
	p := &shellProc{cmd: cmd, pid: cmd.Process.Pid, exitFD: -1, exitW: -1, done: make(chan struct{})}
	if st, ok := readStat(p.pid); ok {
		p.startTime = st.startTime
	}
	fd, err := unix.PidfdOpen(p.pid, 0)
	if err == nil {
		unix.CloseOnExec(fd)
		p.exitFD = fd
		return p, nil
	}
	r, w, err := nbPipe()
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("creating exit pipe: %w", err)
	}
	p.exitFD, p.exitW = r, w
	go p.wait()
	return p, nil
}

// wait reaps the shell (blocking until it exits) and returns its state.
func (p *shellProc) wait() *os.ProcessState {
	p.waitOnce.Do(func() {
		_ = p.cmd.Wait()
		p.state = p.cmd.ProcessState
		p.reaped.Store(true)
		close(p.done)
		if p.exitW >= 0 {
			_, _ = unix.Write(p.exitW, []byte{1})
		}
	})
	<-p.done
	return p.state
}

// exited reports, without blocking, whether the shell has exited.
func (p *shellProc) exited() bool {
	fds := []unix.PollFd{{Fd: int32(p.exitFD), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// signal sends sig to the shell unless it has been reaped.
func (p *shellProc) signal(sig unix.Signal) {
	if !p.reaped.Load() {
		_ = unix.Kill(p.pid, sig)
	}
}

func (p *shellProc) closeFDs() {
	closeFD(&p.exitFD)
	closeFD(&p.exitW)
	p.kids.close()
}

// exitStatus maps a process state to a shell-style status: the exit code, or
// 128+n for a process killed by signal n.
func exitStatus(st *os.ProcessState) int {
	if st == nil {
		return -1
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

func shellEnv(env []string, marker string) []string {
	if env == nil {
		env = os.Environ()
	}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if len(kv) > len(MarkerEnv) && kv[:len(MarkerEnv)+1] == MarkerEnv+"=" {
			continue
		}
		out = append(out, kv)
	}
	return append(out, MarkerEnv+"="+marker)
}

// nbPipe returns a close-on-exec pipe whose both ends are non-blocking.
func nbPipe() (r, w int, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return -1, -1, err
	}
	return p[0], p[1], nil
}

// pipeFor returns a close-on-exec pipe with only the engine's end (read or
// write) non-blocking; the other end, for the shell, blocks.
func pipeFor(engineReads bool) (r, w int, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, -1, err
	}
	mine := p[1]
	if engineReads {
		mine = p[0]
	}
	if err := unix.SetNonblock(mine, true); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return -1, -1, err
	}
	return p[0], p[1], nil
}

func closeFD(fd *int) {
	if *fd >= 0 {
		_ = unix.Close(*fd)
		*fd = -1
	}
}

// stream is the engine's side of one output pipe of one command.
type stream struct {
	r, w int    // w: the engine's copy of the write end, held while running
	path string // the named pipe a session's frame opens, removed by finish
	buf  capBuf
	eof  bool
	// raw, for an interactive command: output is kept in pend, bytes not
	// yet returned, which expect patterns are matched against; at most
	// max bytes, the oldest dropped first (counted in dropped).
	raw     bool
	max     int
	pend    []byte
	dropped int64
	// sink, when set, is handed each read as it comes (ExecRequest.OnOutput).
	sink func(p []byte)
}

// received is how many bytes a raw stream has taken in since its output
// was last returned (pend and what was dropped from it): it grows exactly
// when the command writes.
func (st *stream) received() int64 { return int64(len(st.pend)) + st.dropped }

// write keeps p as the stream's output.
func (st *stream) write(p []byte) {
	if st.sink != nil {
		st.sink(p)
	}
	if !st.raw {
		st.buf.write(p)
		return
	}
	st.pend = append(st.pend, p...)
	if over := len(st.pend) - st.max; over > 0 {
		st.pend = append(st.pend[:0], st.pend[over:]...)
		st.dropped += int64(over)
	}
}

// take returns the first n pending bytes as output (capped and encoded as
// a finished command's), then drops them and the skip bytes after them.
func (st *stream) take(n, skip int) (out string, truncated bool) {
	b := newCapBuf(st.max)
	b.write(st.pend[:n])
	truncated = st.dropped > 0 || b.truncated()
	st.pend = append(st.pend[:0], st.pend[n+skip:]...)
	st.dropped = 0
	return b.String(), truncated
}

// newStream makes an anonymous pipe, whose write end the caller hands to
// the command (RunOnce).
func newStream(max int) (*stream, error) {
	r, w, err := pipeFor(true)
	if err != nil {
		return nil, fmt.Errorf("creating output pipe: %w", err)
	}
	return &stream{r: r, w: w, buf: newCapBuf(max)}, nil
}

// newFifoStream makes a named pipe in dir that a session's frame opens.
func newFifoStream(dir string, max int) (*stream, error) {
	path, r, w, err := newFifo(dir)
	if err != nil {
		return nil, fmt.Errorf("creating output pipe: %w", err)
	}
	return &stream{r: r, w: w, path: path, buf: newCapBuf(max), max: max}, nil
}

// newFifo makes a named pipe with a fresh random name in dir, which only
// this process's user can open, and opens its read end (non-blocking) and
// write end, both close-on-exec. The name is independent of every nonce:
// a command that looks at its descriptors learns nothing it could forge a
// status line with.
func newFifo(dir string) (path string, r, w int, err error) {
	path = filepath.Join(dir, "ch-"+newNonce()[:20])
	if err := unix.Mkfifo(path, 0o600); err != nil {
		return "", -1, -1, fmt.Errorf("mkfifo %s: %w", path, err)
	}
	// A named pipe opens for writing without blocking once it has a reader.
	if r, err = unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
		if w, err = unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err != nil {
			unix.Close(r)
		}
	}
	if err != nil {
		os.Remove(path)
		return "", -1, -1, fmt.Errorf("opening %s: %w", path, err)
	}
	return path, r, w, nil
}

// unlink removes the stream's named pipe; the descriptors stay valid.
func (st *stream) unlink() {
	if st.path != "" {
		os.Remove(st.path)
		st.path = ""
	}
}

// readAvailable reads what the pipe holds, without blocking.
func (st *stream) readAvailable(scratch []byte) {
	for st.r >= 0 && !st.eof {
		n, err := unix.Read(st.r, scratch)
		switch {
		case n > 0:
			st.write(scratch[:n])
		case err == unix.EINTR:
		case n == 0 && err == nil:
			st.eof = true
			return
		default:
			return // EAGAIN, or an error we cannot act on
		}
	}
}

// finish collects what the command wrote before it completed and lets go of
// the pipe. Everything the command's waited-for processes wrote is already in
// the pipe, so it reads exactly what the pipe holds now (a background job
// that keeps writing cannot prolong this). If background processes still
// hold the pipe open, it goes to orphans, which drains it until they close
// it; what they write from now on is discarded.
func (st *stream) finish(scratch []byte, orphans *orphanSet) {
	st.unlink()
	closeFD(&st.w)
	if st.r < 0 {
		return
	}
	for pending := fionread(st.r); pending > 0 && !st.eof; {
		n, err := unix.Read(st.r, scratch[:min(len(scratch), pending)])
		if n > 0 {
			st.write(scratch[:n])
			pending -= n
			continue
		}
		if err == unix.EINTR {
			continue
		}
		st.eof = n == 0 && err == nil
		break
	}
	if !st.eof {
		n, err := unix.Read(st.r, scratch)
		st.eof = n == 0 && err == nil
	}
	if st.eof || orphans == nil {
		closeFD(&st.r)
		return
	}
	orphans.add(st.r)
	st.r = -1
}

func (st *stream) close() {
	st.unlink()
	closeFD(&st.r)
	closeFD(&st.w)
}

// orphanSet drains output pipes that background jobs still hold after their
// command completed, so that those jobs neither block on a full pipe nor die
// of SIGPIPE, and their late output never reaches a later command.
type orphanSet struct {
	mu     sync.Mutex // guards files and closed
	files  map[*os.File]struct{}
	closed bool
	wg     sync.WaitGroup
}

func (o *orphanSet) add(fd int) {
	f := os.NewFile(uintptr(fd), "orphaned output pipe") // fd is non-blocking: netpoller
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		f.Close()
		return
	}
	if o.files == nil {
		o.files = map[*os.File]struct{}{}
	}
	o.files[f] = struct{}{}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		_, _ = io.Copy(io.Discard, f)
		o.mu.Lock()
		delete(o.files, f)
		o.mu.Unlock()
		f.Close()
	}()
}

// closeAll stops draining; writers still alive get EPIPE.
func (o *orphanSet) closeAll() {
	o.mu.Lock()
	o.closed = true
	for f := range o.files {
		f.Close()
	}
	o.mu.Unlock()
	o.wg.Wait()
}

// killTree kills, with SIGKILL, every process of a session or one-shot run
// it can find: the shell and its descendants, every process of the
// shell's session (while the shell is not reaped: its pid names the
// session only as long as the shell holds it), and every process carrying
// the marker in its environment (those that left the session with setsid).
//
// It stops them first (SIGSTOP), pass after pass, until a pass finds none
// it has not stopped: a stopped process cannot fork, and its children stay
// its children, so a pass finds what the processes stopped before forked,
// even a child that cleared its environment and left the session. Killed at
// once instead, a process's last children were re-parented away from the
// tree as it died, and those without the marker or the session were lost.
// Then it kills what it stopped and waits for it to die. What it could not
// find is a process that left the session, cleared its environment and
// was re-parented before the kill began (doc.go, on Close).
//
// It returns an error naming the processes still alive some 1.3 s after
// their SIGKILL (one in uninterruptible sleep, D, or in a frozen cgroup v1
// freezer), nil when none is.
func killTree(p *shellProc, marker string) error {
	held := map[int]procStat{} // stopped (or being stopped), by pid
	for i := 0; i < killPasses; i++ {
		var roots []int
		sid := 0
		if !p.reaped.Load() {
			roots, sid = append(roots, p.pid), p.pid
			_ = unix.Kill(-p.pid, unix.SIGSTOP) // the shell leads its own session and group
		}
		for pid := range held {
			roots = append(roots, pid)
		}
		var fresh []int
		for _, pid := range append(descendants(childLister(), roots), sessionProcesses(marker, sid, p.startTime)...) {
			st, ok := readStat(pid)
			if !ok || !alive(st) {
				continue
			}
			if h, ok := held[pid]; ok && h.startTime == st.startTime {
				continue
			}
			held[pid] = st
			fresh = append(fresh, pid)
		}
		if len(fresh) == 0 {
			break
		}
		signal(fresh, unix.SIGSTOP)
		waitStopped(held)
	}
	var pids []int
	for pid := range held {
		pids = append(pids, pid)
	}
	signal(pids, unix.SIGKILL)
	if !p.reaped.Load() {
		_ = unix.Kill(-p.pid, unix.SIGKILL)
	}
	for i := 0; i < killPasses; i++ {
		if live := liveOf(held); len(live) == 0 {
			return nil
		}
		time.Sleep(killPause(i))
	}
	var names []string
	for _, pid := range liveOf(held) {
		st, _ := readStat(pid)
		names = append(names, fmt.Sprintf("%d (%s, state %c)", pid, st.comm, st.state))
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	return fmt.Errorf("%w: %s", ErrSurvivors, strings.Join(names, ", "))
}

// killPasses bounds killTree's passes: of stopping what it finds, and of
// waiting for what it killed to die.
const killPasses = 50

// waitStopped waits, a few ms at most, until every process of held is
// stopped or dead, so that none forks after the next pass has looked.
// One that does not stop (it sleeps in D) is killed as it is.
func waitStopped(held map[int]procStat) {
	for i := 0; i < 10; i++ {
		done := true
		for pid, h := range held {
			if st, ok := readStat(pid); ok && st.startTime == h.startTime && alive(st) && !stopped(st) {
				done = false
				break
			}
		}
		if done {
			return
		}
		time.Sleep(killPause(i))
	}
}

// liveOf returns the processes of held still alive.
func liveOf(held map[int]procStat) []int {
	var live []int
	for pid, h := range held {
		if st, ok := readStat(pid); ok && st.startTime == h.startTime && alive(st) {
			live = append(live, pid)
		}
	}
	return live
}

// killPause is how long killTree waits after its pass i for what it
// stopped or killed: 0.1 ms at first, since a killed shell is gone within
// a fraction of a millisecond (a session's close waited whole milliseconds
// for it), then doubling up to i+1 ms, for some 1.2 s over 50 passes.
func killPause(i int) time.Duration {
	return min(100*time.Microsecond<<min(i, 10), time.Duration(i+1)*time.Millisecond)
}

// wakePipe lets a context's cancellation interrupt pollFor.
type wakePipe struct{ r, w int }

func newWakePipe() (wakePipe, error) {
	r, w, err := nbPipe()
	return wakePipe{r, w}, err
}

func (wp wakePipe) wake() { _, _ = unix.Write(wp.w, []byte{1}) }

func (wp wakePipe) drain() {
	var b [64]byte
	for {
		if n, _ := unix.Read(wp.r, b[:]); n <= 0 {
			return
		}
	}
}

func (wp *wakePipe) close() {
	closeFD(&wp.r)
	closeFD(&wp.w)
}

func readable(pfd unix.PollFd) bool {
	return pfd.Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0
}
