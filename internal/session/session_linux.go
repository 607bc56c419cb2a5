package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Timing of the engine's own checks; none of them is on the fast path.
const (
	idleCheckEvery = 100 * time.Millisecond // look for a lost status
	abortTick      = 5 * time.Millisecond   // while interrupting a command
	repeatIntEvery = 250 * time.Millisecond // Ctrl-C again to a quiet interactive program
	recoveryEvery  = 20 * time.Millisecond  // at most one recovery frame per
	setupTimeout   = 30 * time.Second       // when Start's ctx has no deadline
)

// Session is a persistent interactive bash whose commands are framed so that
// nothing they print or change can be mistaken for the framing. See doc.go.
type Session struct {
	name   string
	opts   Options
	marker string // value of MarkerEnv in the shell's environment
	rcFunc string // shell function that sets $? (defined by the setup line)
	shell  *shellProc

	// The engine's ends of the session's pipes (all close-on-exec). The
	// shell reaches the stdin, output and status pipes by path, as named
	// pipes in chanDir (see doc.go).
	scriptW    int    // frames, to the shell's stdin (non-blocking)
	scriptLink string // "pipe:[ino]" of that pipe, to recognise the shell's fd 0
	stdinW     int    // held, never written: commands read from a pipe that never ends
	stdinPath  string
	statusR    int // status channel (non-blocking)
	statusW    int // held so that the read end never reports hang-up
	statusPath string
	chanDir    string
	ownDir     bool     // chanDir was made by Start and goes with Close
	ptyMaster  int      // see openPTY; -1 if none
	ptySlave   *os.File // held open so that the master never hangs up
	ptyPath    string   // the slave's path, stdin of interactive commands; "" if none
	wake       wakePipe
	waits      pollSet // what the commands' loops wait on, kept between commands
	orphans    orphanSet

	closeOnce sync.Once
	closing   atomic.Bool
	used      atomic.Bool // an Exec was asked for (see closeUnused)
	aliveMu   sync.Mutex  // keeps Close from closing shell.exitFD under Alive

	mu       sync.Mutex // serializes Exec and Close; guards the fields below
	ended    bool       // the shell exited
	exitCode int        // its status, when ended
	closed   bool
	idleOK   bool // readSyscall works for the shell: lost statuses are detected
	// idleLooks counts the looks for the new shell back at its read
	// (settleIdle); none are taken once idleOK is known.
	idleLooks int
	// lastStatus is the status of the previous command; the next frame
	// restores it with rcFunc so that $? carries over as at a prompt.
	lastStatus int
	status     statusParser
	scratch    []byte
	// active is the interactive command that has not completed, between
	// the calls that wait for its output.
	active *run
	// leftovers of the last interrupted command (see leftover_linux.go).
	leftovers []leftover
}

// Start starts a session's shell and waits until it answers. ctx bounds the
// start only; the session lives until Close (or until its shell exits).
func Start(ctx context.Context, name string, opts Options) (*Session, error) {
	opts = opts.withDefaults()
	opts.Gate.Enter()
	defer opts.Gate.Leave()
	s := &Session{
		name: name, opts: opts, marker: newNonce(),
		scriptW: -1, stdinW: -1, statusR: -1, statusW: -1, ptyMaster: -1,
		wake:    wakePipe{-1, -1},
		scratch: make([]byte, 64<<10),
	}
	if err := s.start(ctx); err != nil {
		if s.shell != nil {
			err = errors.Join(err, killTree(s.shell, s.marker))
			s.shell.wait()
		}
		s.teardown()
		return nil, fmt.Errorf("starting session %q: %w", name, err)
	}
	return s, nil
}

// checkDir says what is wrong with dir as a session's working directory,
// or nil ("" is the caller's own).
func checkDir(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("working directory %s: %w", dir, errors.Unwrap(err))
	case !fi.IsDir():
		return fmt.Errorf("working directory %s is not a directory", dir)
	}
	return nil
}

func (s *Session) start(ctx context.Context) error {
	scriptR, scriptW, err := pipeFor(false)
	if err != nil {
		return fmt.Errorf("creating script pipe: %w", err)
	}
	s.scriptW = scriptW
	script := os.NewFile(uintptr(scriptR), "session script")
	defer script.Close()
	var st unix.Stat_t
	if err := unix.Fstat(scriptW, &st); err != nil {
		return fmt.Errorf("stat of script pipe: %w", err)
	}
	s.scriptLink = "pipe:[" + strconv.FormatUint(st.Ino, 10) + "]"
	if err := s.openChannels(); err != nil {
		return err
	}
	if s.wake, err = newWakePipe(); err != nil {
		return fmt.Errorf("creating wake pipe: %w", err)
	}

	cmd := exec.Command(s.opts.Shell, "--noprofile", "--norc", "--noediting", "-i")
	// HISTFILE= keeps the interactive shell from loading a history file;
	// the setup line below unsets it again.
	cmd.Args[0] = filepath.Base(s.opts.Shell) // "bash: ..." in messages
	cmd.Env = append(shellEnv(s.opts.Env, s.marker), "HISTFILE=")
	cmd.Dir = s.opts.Dir
	cmd.Stdin = script
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// An interactive bash restores its terminal's settings after a
	// foreground process dies of a signal, and complains when fd 2 at
	// start-up (its "terminal") is not a tty. A pty that no data goes to
	// keeps that message out of command output; without one (no /dev/ptmx)
	// the session works the same and the message may appear.
	master, slave, err := openPTY()
	if err == nil {
		s.ptyMaster, s.ptySlave = master, slave
		cmd.Stderr = slave
		if s.ptyPath, err = prepareTerminal(master); err != nil {
			s.ptyPath = "" // interactive commands fail with ErrNoTerminal
		}
	}
	if s.shell, err = startShell(cmd, s.opts.Start); err != nil {
		if derr := checkDir(s.opts.Dir); derr != nil {
			return derr // exec reports a failed chdir as the shell's
		}
		return fmt.Errorf("running %s: %w", s.opts.Shell, err)
	}
	s.shell.kids = openChildFiles(s.shell.pid) // not reaped before teardown: its own

	// The setup line runs outside any frame: it sends the shell's own
	// stderr (prompts, job notices) to /dev/null and turns off interactive
	// features that would interfere. Then one ordinary frame proves that
	// the shell is an interactive bash and that the status channel works.
	s.rcFunc = "__msb_rc_" + s.marker[:8]
	setup := "exec 2>/dev/null; set +o history +o histexpand; " +
		"unset HISTFILE TMOUT PROMPT_COMMAND PS0; PS1= PS2=; shopt -s expand_aliases; " +
		s.rcFunc + "() { \\builtin return \"$1\"; }\n"
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, setupTimeout)
		defer cancel()
	}
	res, err := s.exec(ctx, ExecRequest{Command: `[[ $- == *i* ]]`}, setup, nil)
	switch {
	case err != nil:
		return err
	case res.SessionEnded:
		return fmt.Errorf("shell %s exited with status %d during setup: %s", s.opts.Shell, res.ExitCode, res.Output)
	case res.TimedOut:
		return fmt.Errorf("shell %s did not answer: %w", s.opts.Shell, ctx.Err())
	case res.ExitCode != 0:
		return fmt.Errorf("shell %s is not an interactive bash: %s", s.opts.Shell, res.Output)
	}
	// The shell now goes back to its read, which is how idle() recognises
	// it: one look here, the rest before the first command (settleIdle).
	s.idleOK, s.idleLooks = s.idle(), 1
	return nil
}

// settleIdle waits, before the session's first command, until the new
// shell is seen back at its read after the setup frame, which says that
// idle() works for it (idleOK): looked for every 50 µs for 2 ms, then
// every 1 ms, ~50 ms in all. A shell not seen by then (a kernel without
// /proc/<pid>/syscall) leaves idleOK false. Start looked once: bash is
// often still on its way there when the setup frame's status comes, and
// back by the time the caller's first command does. The caller holds s.mu.
func (s *Session) settleIdle() {
	for ; !s.idleOK && s.idleLooks < idleLooksMax; s.idleLooks++ {
		pause := time.Millisecond
		if s.idleLooks < idleFineLooks {
			pause = 50 * time.Microsecond
		}
		nap(pause)
		s.idleOK = s.idle()
	}
}

// How many times settleIdle looks for the new shell at its read: every
// 50 µs at first (bash is back within a fraction of a millisecond), then
// every 1 ms.
const (
	idleFineLooks = 40
	idleLooksMax  = idleFineLooks + 48
)

// openChannels makes the named pipes of the command's stdin and of the
// status channel.
func (s *Session) openChannels() error {
	s.chanDir = s.opts.ChanDir
	if s.chanDir == "" {
		dir, err := os.MkdirTemp("", "msb-session-")
		if err != nil {
			return fmt.Errorf("creating the session's channel dir: %w", err)
		}
		s.chanDir, s.ownDir = dir, true
	}
	path, r, w, err := newFifo(s.chanDir)
	if err != nil {
		return fmt.Errorf("creating stdin pipe: %w", err)
	}
	unix.Close(r) // the commands are its readers
	s.stdinPath, s.stdinW = path, w
	if s.statusPath, s.statusR, s.statusW, err = newFifo(s.chanDir); err != nil {
		return fmt.Errorf("creating status pipe: %w", err)
	}
	return nil
}

// Exec runs one command in the session and returns its result. Commands of
// one session run one at a time. The shell's state (cwd, variables,
// functions, aliases, options) carries over from one command to the next.
//
// The error is nil whenever the command ran, even if it failed, timed out or
// ended the shell (see Result); it is non-nil when the command could not be
// run (ErrSessionEnded, ErrInvalidCommand, or ctx already done), when its
// status was lost (ErrStatusLost, with the output collected so far and
// ExitCode -1), or when ctx ended while it ran (the command was interrupted
// as on a timeout, and the error wraps ctx.Err()).
func (s *Session) Exec(ctx context.Context, req ExecRequest) (Result, error) {
	if strings.IndexByte(req.Command, 0) >= 0 {
		return Result{}, fmt.Errorf("session %q: command contains a NUL byte: %w", s.name, ErrInvalidCommand)
	}
	s.used.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.Gate.Enter() // with s.mu held: see Gate
	defer s.opts.Gate.Leave()
	switch {
	case s.closed:
		return Result{}, fmt.Errorf("session %q is closed: %w", s.name, ErrSessionEnded)
	case s.ended:
		return Result{}, fmt.Errorf("session %q: shell exited with status %d: %w", s.name, s.exitCode, ErrSessionEnded)
	case ctx.Err() != nil:
		return Result{}, fmt.Errorf("session %q: command not run: %w", s.name, ctx.Err())
	case req.Input && req.Interactive, req.Interrupt && !req.Input:
		return Result{}, fmt.Errorf("session %q: interrupt goes with input, and input is not a new interactive command: %w", s.name, ErrInvalidCommand)
	case req.Input:
		return s.input(ctx, req)
	case s.active != nil:
		return Result{}, fmt.Errorf("session %q: %w; send it input or interrupt it", s.name, ErrInteractiveRunning)
	case req.Interactive && s.ptyPath == "":
		return Result{}, fmt.Errorf("session %q: %w", s.name, ErrNoTerminal)
	case req.Interactive && req.SeparateStderr:
		return Result{}, fmt.Errorf("session %q: an interactive command's output is merged (no separate stderr): %w", s.name, ErrInvalidCommand)
	case len(req.Expect) > 0 && !req.Interactive:
		return Result{}, fmt.Errorf("session %q: expect patterns are for interactive commands: %w", s.name, ErrInvalidCommand)
	}
	expect, err := compileExpect(req.Expect)
	if err != nil {
		return Result{}, fmt.Errorf("session %q: %w", s.name, err)
	}
	s.settleIdle()
	return s.exec(ctx, req, "", expect)
}

// input sends req.Command to the interactive command that runs and waits
// for its output, with s.mu held.
func (s *Session) input(ctx context.Context, req ExecRequest) (Result, error) {
	r := s.active
	if r == nil {
		return Result{}, fmt.Errorf("session %q: %w", s.name, ErrNotInteractive)
	}
	expect, err := compileExpect(req.Expect)
	if err != nil {
		return Result{}, fmt.Errorf("session %q: %w", s.name, err)
	}
	s.active = nil
	defer func() {
		if s.active != r {
			r.closeStreams() // finished (or failed): finish already read them
		}
	}()
	r.expect, r.input = expect, append(r.input, req.Command...)
	r.deadline = time.Time{}
	stop := context.AfterFunc(ctx, s.wake.wake)
	defer stop()
	r.start = time.Now()
	r.lastIdle = r.start
	if req.Interrupt {
		r.startAbort(r.start, nil)
		r.patientAbort = true
		r.quietFrom, r.receivedThen = r.start, r.streams[0].received()
	} else if req.Timeout > 0 {
		r.deadline = r.start.Add(req.Timeout)
	}
	return r.loop(ctx)
}

// compileExpect compiles an interactive command's expect patterns.
func compileExpect(patterns []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("expect pattern %q: %v: %w", p, err, ErrInvalidCommand)
		}
		out = append(out, re)
	}
	return out, nil
}

// Interactive reports whether an interactive command runs and waits for
// input (see ExecRequest.Interactive).
func (s *Session) Interactive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active != nil
}

// Alive reports whether the session's shell is running and not closed.
func (s *Session) Alive() bool {
	s.aliveMu.Lock()
	defer s.aliveMu.Unlock()
	return !s.closing.Load() && !s.shell.exited()
}

// Rename names the session anew (its errors say the new name). The caller
// makes sure nothing else uses the session meanwhile: a session started
// ahead is renamed before anyone can reach it under the new name.
func (s *Session) Rename(name string) {
	s.mu.Lock()
	s.name = name
	s.mu.Unlock()
}

// Close kills the shell and every process it started, including background
// jobs and processes that left its process tree but kept its session or
// environment marker (see killTree), and releases the session's resources.
// A concurrent Exec returns with SessionEnded. Close is idempotent; the
// first call returns an error wrapping ErrSurvivors, naming them, if
// processes of the session were still alive after their SIGKILL.
func (s *Session) Close() error { return s.close(true) }

// CloseKilled closes sessions whose every process kill ends (the
// supervisor's shutdown, which kills every process of the sandbox's PID
// namespace but itself and then reaps them all): as Close, without Close's
// two searches of /proc for the sessions' processes. Each session is
// marked closing before kill, so that a command running in one returns
// with ErrSessionEnded, as under Close, and not as if its shell's end
// were its own. The shells' groups are killed once more, for a kill that
// missed one. The searches were ~0.3 ms of a sandbox's teardown
// (docs/bench.md, session 18).
func CloseKilled(sessions []*Session, kill func()) {
	for _, s := range sessions {
		s.closing.Store(true)
	}
	kill()
	for _, s := range sessions {
		s.close(false)
	}
}

func (s *Session) close(search bool) error {
	var err error
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		if s.closeUnused() {
			return
		}
		if search {
			err = killTree(s.shell, s.marker)
		} else if !s.shell.reaped.Load() {
			_ = unix.Kill(-s.shell.pid, unix.SIGKILL) // the shell leads its own session and group
		}
		s.wake.wake()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.closed = true
		if s.active != nil {
			s.active.closeStreams()
			s.active = nil
		}
		s.shell.wait()
		if search { // what forked while the shell died; one survivor is named once
			if again := killTree(s.shell, s.marker); err == nil {
				err = again
			}
		}
		s.aliveMu.Lock()
		s.teardown()
		s.aliveMu.Unlock()
	})
	if err != nil {
		return fmt.Errorf("closing session %q: %w", s.name, err)
	}
	return nil
}

// closeUnused closes a session in which no command was ever asked for, and
// reports whether it did. Its shell's process group is then all there is
// of it (nothing could have left the group or carry the marker), so the
// group is killed and the shell reaped without killTree's searches of
// /proc: a spare's session started ahead and not wanted ends in 1.5 ms
// instead of 2.0. It holds mu from its check on, so that an Exec coming
// after finds the session closed; one already waiting has marked it used.
func (s *Session) closeUnused() bool {
	if s.used.Load() || !s.mu.TryLock() {
		return false
	}
	defer s.mu.Unlock()
	if s.used.Load() {
		return false
	}
	s.closed = true
	if !s.shell.reaped.Load() {
		_ = unix.Kill(-s.shell.pid, unix.SIGKILL) // the shell leads its own session and group
	}
	s.shell.wait()
	s.aliveMu.Lock()
	s.teardown()
	s.aliveMu.Unlock()
	return true
}

// teardown closes every descriptor the session holds.
func (s *Session) teardown() {
	if s.shell != nil {
		s.shell.closeFDs()
	}
	for _, fd := range []*int{&s.scriptW, &s.stdinW, &s.statusR, &s.statusW, &s.ptyMaster} {
		closeFD(fd)
	}
	if s.ptySlave != nil {
		s.ptySlave.Close()
	}
	s.waits.close()
	for _, p := range []string{s.stdinPath, s.statusPath} {
		if p != "" {
			os.Remove(p)
		}
	}
	if s.ownDir {
		os.RemoveAll(s.chanDir)
	}
	s.wake.close()
	s.orphans.closeAll()
}

// run is the state of one Exec.
type run struct {
	s        *Session
	nonce    string
	recNonce string // nonce of recovery frames, once interrupted
	pending  []byte // frame bytes not yet written
	streams  []*stream
	before   []procID // the shell's children before the command, if known
	// beforeTicks is the boot time, in starttime units, when the command
	// was sent; without a snapshot (no children files), a child of the
	// shell that started earlier is taken to be an earlier background job.
	beforeTicks uint64

	start    time.Time
	deadline time.Time

	// An interactive command (see ExecRequest.Interactive): its input not
	// yet written to the terminal, and the patterns that end a wait.
	interactive bool
	input       []byte
	expect      []*regexp.Regexp
	// patientAbort: an interrupt asked for by Input (not a timeout); a
	// match of expect ends it, and the program runs on. The program has
	// written nothing since quietFrom, when its output stream had
	// received receivedThen bytes (see repeatInterrupt).
	patientAbort bool
	quietFrom    time.Time
	receivedThen int64

	aborting     bool
	interrupted  bool           // the shell got SIGINT
	signaled     map[int]string // processes of the command that got SIGINT: their comm then
	abortAt      time.Time
	killedShell  bool
	lastRecovery time.Time
	lastSignal   time.Time
	lastIdle     time.Time
	idleStreak   int
	ctxErr       error
}

// exec runs one frame (preceded by prefix, raw shell input) with s.mu held.
func (s *Session) exec(ctx context.Context, req ExecRequest, prefix string, expect []*regexp.Regexp) (Result, error) {
	max := req.MaxOutput
	if max <= 0 {
		max = s.opts.MaxOutput
	}
	r := &run{s: s, nonce: newNonce(), interactive: req.Interactive, expect: expect}
	defer func() {
		if s.active != r {
			r.closeStreams()
		}
	}()
	n := 1
	if req.SeparateStderr {
		n = 2
	}
	for i := 0; i < n; i++ {
		st, err := newFifoStream(s.chanDir, max)
		if err != nil {
			return Result{}, fmt.Errorf("session %q: %w", s.name, err)
		}
		r.streams = append(r.streams, st)
	}
	paths := framePaths{stdin: s.stdinPath, stdout: r.streams[0].path, status: s.statusPath}
	if req.SeparateStderr {
		paths.stderr = r.streams[1].path
	}
	if r.interactive {
		paths.stdin = s.ptyPath
		r.streams[0].raw = true
		flushInput(s.ptyMaster)
	}
	if s.lastStatus != 0 {
		// `f N && :` sets $? to N without tripping set -e or an ERR trap.
		prefix += `\` + s.rcFunc + " " + strconv.Itoa(s.lastStatus) + " && :; "
	}
	r.pending = []byte(prefix + buildFrame(req.Command, r.nonce, paths))

	// Forget what earlier commands left behind: wake-ups, stale status lines.
	s.wake.drain()
	s.readStatus()
	s.status.reset()
	if haveChildrenFiles() {
		r.before = s.childrenIDs() // one small read; a full /proc scan otherwise
	}
	r.beforeTicks = bootTicks()
	s.drainTerminal(nil) // what earlier commands wrote to it is not this one's
	s.checkLeftovers()

	stop := context.AfterFunc(ctx, s.wake.wake)
	defer stop()
	r.start = time.Now()
	r.lastIdle = r.start
	if req.Timeout > 0 {
		r.deadline = r.start.Add(req.Timeout)
	}
	return r.loop(ctx)
}

func (r *run) loop(ctx context.Context) (Result, error) {
	s := r.s
	fds := make([]unix.PollFd, 0, 8)
	for {
		r.pending = writeSome(s.scriptW, r.pending)
		if r.interactive {
			r.input = writeSome(s.ptyMaster, r.input)
		}
		fds = fds[:0]
		fds = append(fds,
			unix.PollFd{Fd: int32(s.statusR), Events: unix.POLLIN},
			unix.PollFd{Fd: int32(s.shell.exitFD), Events: unix.POLLIN},
			unix.PollFd{Fd: int32(s.wake.r), Events: unix.POLLIN})
		for _, st := range r.streams {
			fds = append(fds, unix.PollFd{Fd: int32(st.r), Events: unix.POLLIN})
		}
		if len(r.pending) > 0 {
			fds = append(fds, unix.PollFd{Fd: int32(s.scriptW), Events: unix.POLLOUT})
		}
		if s.ptyPath != "" {
			ev := int16(unix.POLLIN)
			if len(r.input) > 0 {
				ev |= unix.POLLOUT
			}
			fds = append(fds, unix.PollFd{Fd: int32(s.ptyMaster), Events: ev})
		}
		if err := s.waits.wait(s.opts.Gate, fds, r.nextWake()); err != nil {
			return Result{}, fmt.Errorf("session %q: poll: %w", s.name, err)
		}
		if len(s.leftovers) > 0 {
			s.checkLeftovers()
		}
		for _, st := range r.streams {
			st.readAvailable(s.scratch)
		}
		s.drainTerminal(r.streams[0])
		if code, ok := s.readStatus(r.nonce, r.recNonce); ok {
			return r.finish(code, false)
		}
		if readable(fds[1]) {
			return r.finish(0, true)
		}
		if readable(fds[2]) {
			s.wake.drain()
		}
		if res, ok := r.matched(ctx); ok {
			return res, nil
		}
		now := time.Now()
		if !r.aborting {
			switch {
			case s.closing.Load():
				r.startAbort(now, nil)
			case ctx.Err() != nil:
				r.startAbort(now, ctx.Err())
			case r.interactive && !r.deadline.IsZero() && !now.Before(r.deadline):
				return r.waitTimedOut(), nil
			case !r.deadline.IsZero() && !now.Before(r.deadline):
				r.startAbort(now, nil)
			case s.idleOK && len(r.pending) == 0 && now.Sub(r.lastIdle) >= idleCheckEvery:
				r.lastIdle = now
				if !s.idle() {
					r.idleStreak = 0
					break
				}
				// Idle twice, with the status channel read in between: the
				// shell finished the frame without reporting.
				if r.idleStreak++; r.idleStreak >= 2 {
					res, _ := r.finish(-1, false)
					return res, fmt.Errorf("session %q: %w", s.name, ErrStatusLost)
				}
			}
			continue
		}
		r.abortStep(now)
	}
}

// writeSome writes what it can of b to the non-blocking fd and returns the
// rest; on an error other than EAGAIN (EPIPE: the reader is gone) the rest
// is dropped.
func writeSome(fd int, b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	n, err := unix.Write(fd, b)
	if n > 0 {
		b = b[n:]
	}
	if err != nil && err != unix.EAGAIN && err != unix.EINTR {
		return nil
	}
	return b
}

// drainTerminal reads what processes wrote to the session's terminal (an
// interactive command's prompts may go to /dev/tty) into st, as output of
// the running command (nil: discarded), so that writers never block on it.
func (s *Session) drainTerminal(st *stream) {
	if s.ptyPath == "" {
		return
	}
	for {
		n, err := unix.Read(s.ptyMaster, s.scratch)
		if n > 0 {
			if st != nil {
				st.write(s.scratch[:n])
			}
			continue
		}
		if err != unix.EINTR {
			return
		}
	}
}

// matched ends an interactive command's wait at the earliest match of its
// expect patterns in the output not yet returned: the output before the
// match is returned, the command runs on. An interrupt asked for by Input
// stops there too (the program survived it); one from a timeout or a
// cancelled context does not.
func (r *run) matched(ctx context.Context) (Result, bool) {
	if !r.interactive || len(r.expect) == 0 || r.aborting && !r.patientAbort || ctx.Err() != nil {
		return Result{}, false
	}
	st := r.streams[0]
	best, end, pat := -1, 0, ""
	for _, re := range r.expect {
		if loc := re.FindIndex(st.pend); loc != nil && (best < 0 || loc[0] < best) {
			best, end, pat = loc[0], loc[1], re.String()
		}
	}
	if best < 0 {
		return Result{}, false
	}
	out, trunc := st.take(best, end-best)
	r.aborting, r.patientAbort, r.interrupted, r.signaled = false, false, false, nil
	r.s.active = r
	return Result{Output: out, Truncated: trunc, Running: true, Matched: pat, Duration: time.Since(r.start)}, true
}

// waitTimedOut ends an interactive command's wait at its timeout: the
// command runs on, and its output so far is shown but not consumed.
func (r *run) waitTimedOut() Result {
	st := r.streams[0]
	b := newCapBuf(st.max)
	b.write(st.pend)
	r.s.active = r
	return Result{Output: b.String(), Truncated: st.dropped > 0 || b.truncated(), Running: true, TimedOut: true, Duration: time.Since(r.start)}
}

func (r *run) closeStreams() {
	for _, st := range r.streams {
		st.close()
	}
}

// nextWake is when the loop must look again even if no descriptor is ready.
func (r *run) nextWake() time.Time {
	if r.aborting || r.s.watchingLeftovers(time.Now()) {
		return time.Now().Add(abortTick)
	}
	next := r.deadline
	if r.s.idleOK && len(r.pending) == 0 {
		if t := r.lastIdle.Add(idleCheckEvery); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next
}

// startAbort interrupts the command as Ctrl-C would: SIGINT to the shell,
// which then abandons the rest of the command line and goes back to reading
// input, and to the processes the command started.
func (r *run) startAbort(now time.Time, cause error) {
	r.aborting, r.abortAt, r.ctxErr = true, now, cause
	r.recNonce = newNonce()
	r.s.shell.signal(unix.SIGCONT)
	r.interrupt(now, true)
}

// interrupt sends SIGINT to the shell (see interruptShell) and then, when
// the shell got it or always is set, to the processes the command started.
// The shell comes first: bash abandons the rest of the line only if the
// interrupt has reached it by the time it learns that its foreground job
// died of SIGINT. A job that dies first looks to bash like a command killed
// by someone else, and the list goes on (`cat; echo NOT-REACHED` would
// print). A terminal's Ctrl-C, sent to the whole process group at once,
// gives the same order. The processes are listed after the shell was
// signalled, so none it started before the interrupt is missed.
func (r *run) interrupt(now time.Time, always bool) {
	r.interruptShell(now)
	if always || r.interrupted {
		r.signalNew(r.newProcesses())
	}
}

// interruptLate interrupts, the shell first again, the processes of the
// command that the earlier interrupts missed: those started since, and those
// that have exec'd since. The shell may have been forking one when the
// interrupt came, and a forked shell that has not yet reset its signal
// handlers takes SIGINT as a note to itself and execs the command anyway.
func (r *run) interruptLate(now time.Time) {
	var late []int
	for _, pid := range r.newProcesses() {
		if st, ok := readStat(pid); ok && r.signaled[pid] != st.comm {
			late = append(late, pid)
		}
	}
	r.lastSignal = now
	if len(late) > 0 {
		r.interruptShell(now)
		r.signalNew(late)
	}
}

// repeatInterrupt presses Ctrl-C again, as a user at a terminal would,
// when the interactive program asked to take one has written nothing for
// repeatIntEvery. A program may lose the first: python3 at its prompt
// checks for a signal only when one interrupts its wait for input, and a
// SIGINT that lands after its check but before the wait goes unnoticed
// until the next key. SWE-ReX's interrupt retries for the same reason.
func (r *run) repeatInterrupt(now time.Time) {
	if n := r.streams[0].received(); n != r.receivedThen {
		r.quietFrom, r.receivedThen = now, n
		return
	}
	if now.Sub(r.quietFrom) >= repeatIntEvery {
		r.quietFrom = now
		r.signalNew(r.newProcesses())
	}
}

// signalNew sends SIGINT to procs and remembers what each was running.
func (r *run) signalNew(procs []int) {
	if r.signaled == nil {
		r.signaled = map[int]string{}
	}
	for _, pid := range procs {
		if st, ok := readStat(pid); ok {
			r.signaled[pid] = st.comm
		}
	}
	signal(procs, unix.SIGINT)
}

// interruptShell sends SIGINT to the shell, but only while it is running the
// command (inside eval, whose redirection replaced the frame pipe on its
// stdin). An interrupt while the shell reads or parses a line would make it
// drop part of the line and run the rest as a command.
func (r *run) interruptShell(now time.Time) {
	if r.s.inCommand() {
		r.s.shell.signal(unix.SIGINT)
		r.interrupted = true
	}
	r.lastSignal = now
}

// abortStep escalates an interrupted command that has not yet reported:
// after KillGrace its processes are killed and the shell is interrupted
// again, repeatedly; after twice KillGrace the shell itself is killed, which
// ends the session. Whenever the shell is back at its input, a recovery
// frame asks it for the status of what it ran last.
func (r *run) abortStep(now time.Time) {
	s := r.s
	grace := s.opts.KillGrace
	elapsed := now.Sub(r.abortAt)
	switch {
	case elapsed >= 2*grace:
		if !r.killedShell {
			r.killedShell = true
			signal(r.newProcesses(), unix.SIGKILL)
			s.shell.signal(unix.SIGKILL)
		}
		return
	case elapsed >= grace && now.Sub(r.lastSignal) >= recoveryEvery:
		signal(r.newProcesses(), unix.SIGKILL)
		r.interruptShell(now)
	case !r.interrupted:
		r.interrupt(now, false) // the command had not started at the deadline
	case elapsed < grace && now.Sub(r.lastSignal) >= recoveryEvery:
		r.interruptLate(now)
		if r.patientAbort {
			r.repeatInterrupt(now)
		}
	}
	if len(r.pending) > 0 {
		return
	}
	due := s.idleOK && now.Sub(r.lastRecovery) >= recoveryEvery && s.idle()
	if !s.idleOK {
		// Blind: without /proc/<pid>/syscall, ask from time to time.
		due = elapsed >= grace/4 && now.Sub(r.lastRecovery) >= grace/4
	}
	if due {
		r.lastRecovery = now
		// The interrupt skipped the shell's undoing of the command's
		// redirections, which leaves the shell's saved copies of its
		// descriptors open; close them along the way.
		frame := recoveryFrame(r.recNonce, s.statusPath, leakedFDs(s.shell.pid))
		_, _ = unix.Write(s.scriptW, []byte(frame)) // small: atomic, or EAGAIN and retried later
	}
}

// newProcesses returns the processes the current command started: the
// shell's children that were not there before it, and their descendants.
// Background jobs of earlier commands are left alone.
func (r *run) newProcesses() []int {
	s := r.s
	if s.shell.reaped.Load() {
		return nil
	}
	children := childLister()
	var roots []int
	for _, pid := range children(s.shell.pid) {
		st, ok := readStat(pid)
		if !ok || !alive(st) {
			continue
		}
		old := false
		if haveChildrenFiles() {
			old = slices.Contains(r.before, procID{pid, st.startTime})
		} else {
			// Within the same clock tick counts as new: a background job
			// started less than 10 ms before the command may be taken
			// for part of it.
			old = st.startTime < r.beforeTicks
		}
		if !old {
			roots = append(roots, pid)
		}
	}
	if len(roots) == 0 {
		return nil
	}
	return descendants(children, roots)
}

// finish builds the result once the status arrived (code) or the shell
// exited (ended).
func (r *run) finish(code int, ended bool) (Result, error) {
	s := r.s
	res := Result{ExitCode: code, TimedOut: r.aborting}
	if r.aborting && code == 0 {
		// A command that timed out never reports success, even when a
		// process caught the interrupt and exited cleanly and the rest of
		// the line ran: 130 is what a shell reports for SIGINT.
		res.ExitCode = 130
	}
	if ended {
		st := s.shell.wait()
		s.ended, s.exitCode = true, exitStatus(st)
		res.ExitCode, res.SessionEnded = s.exitCode, true
	}
	res.Duration = time.Since(r.start)
	if code >= 0 && !ended {
		s.lastStatus = code
	}
	if r.aborting && !ended {
		r.keepLeftovers(time.Now())
	}
	for _, st := range r.streams {
		st.finish(s.scratch, &s.orphans)
	}
	s.drainTerminal(r.streams[0])
	if st := r.streams[0]; st.raw {
		res.Output, res.Truncated = st.take(len(st.pend), 0)
	} else {
		res.Output = st.buf.String()
		res.Truncated = st.buf.truncated()
	}
	if len(r.streams) > 1 {
		res.Stderr = r.streams[1].buf.String()
		res.Truncated = res.Truncated || r.streams[1].buf.truncated()
	}
	if r.ctxErr != nil {
		return res, fmt.Errorf("session %q: command interrupted: %w", s.name, r.ctxErr)
	}
	if ended && s.closing.Load() {
		return res, fmt.Errorf("session %q closed during the command: %w", s.name, ErrSessionEnded)
	}
	return res, nil
}

// readStatus reads the status channel without blocking and reports the
// status carried by a line with one of the wanted nonces.
func (s *Session) readStatus(want ...string) (int, bool) {
	buf := s.scratch[:4096]
	for {
		n, err := unix.Read(s.statusR, buf)
		if n > 0 {
			if code, _, ok := s.status.feed(buf[:n], want...); ok {
				return code, true
			}
			continue
		}
		if err != unix.EINTR {
			return 0, false
		}
	}
}

// idle reports whether the shell is blocked reading its (empty) script pipe:
// it has finished everything it was sent.
func (s *Session) idle() bool {
	if s.shell.reaped.Load() {
		return false
	}
	nr, arg0, ok := readSyscall(s.shell.pid)
	if !ok || nr != unix.SYS_READ || arg0 != 0 {
		return false
	}
	link, err := os.Readlink("/proc/" + strconv.Itoa(s.shell.pid) + "/fd/0")
	if err != nil || link != s.scriptLink {
		return false
	}
	return fionread(s.scriptW) == 0
}

// inCommand reports whether the shell is running a frame's command: its
// stdin is not the frame pipe.
func (s *Session) inCommand() bool {
	if s.shell.reaped.Load() {
		return false
	}
	link, err := os.Readlink("/proc/" + strconv.Itoa(s.shell.pid) + "/fd/0")
	return err == nil && link != s.scriptLink
}

// childrenIDs returns the shell's current children.
func (s *Session) childrenIDs() []procID {
	kids := s.shell.kids.list(s.shell.pid)
	if len(kids) == 0 {
		return nil
	}
	ids := make([]procID, 0, len(kids))
	for _, pid := range kids {
		if st, ok := readStat(pid); ok {
			ids = append(ids, procID{pid, st.startTime})
		}
	}
	return ids
}
