package sbinit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minisandbox/msb/internal/envlist"
	"github.com/minisandbox/msb/internal/sandbox/wire"
	"github.com/minisandbox/msb/internal/session"
	"golang.org/x/sys/unix"
)

// supervisor serves the host's requests inside the sandbox.
type supervisor struct {
	cfg   wire.Config
	out   *wire.Writer
	spawn *spawner // every process of the sandbox is started through it

	mu       sync.Mutex // guards sessions, running, tty and resetting
	sessions map[string]*session.Session
	// running holds, per session, each exec in flight.
	running map[string]map[*wire.Request]inflight
	tty     *ttyRelay
	// resetting: between OpReset and OpResetDone (reset_linux.go).
	resetting bool
	// sudoLn is the sudo socket's listener (Config.Sudo), made again in
	// the new root after a reset, where only reset and resetDone touch it.
	sudoLn *net.UnixListener

	gate slots // bounds the requests at work at once (see slots)
	// files is held by each request that uses the root's paths (file
	// operations, and a session's open, which makes its named pipes in
	// wire.SessionDir: rootOp), and by a reset from OpReset to
	// OpResetDone: none sees the root while it is replaced. A session's
	// command passes it on its way in (sessionExec).
	files sync.RWMutex

	trim trimmer // the free heap returned once idle
	// flows are the streaming execs in flight (stream_linux.go).
	flows flows
	// lastID is the highest request ID read (wire.OpExecs).
	lastID atomic.Uint64
}

func supervisorMain() error {
	mainAt := wire.Mono()
	// exec made the process dumpable again. A dumpable supervisor could be
	// reached by the agent's processes, which have its user: its memory
	// (/proc/1/mem), its descriptors (/proc/1/fd, pidfd_getfd: the control
	// socket), its environment. Not dumpable, only CAP_SYS_PTRACE reaches
	// it, and no process of the sandbox has that. Nothing of the agent's
	// runs before this line: init waited for the host's start.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("making the supervisor non-dumpable: %w", err)
	}
	cfg, err := readConfig()
	if err != nil {
		return err
	}
	if err := keepDiskFd(cfg.Disk); err != nil {
		return err
	}
	cfg.Stamps = append(cfg.Stamps, wire.Stamp{Step: StepSupMain, Mono: mainAt})
	os.Unsetenv(EnvConfigFd)
	return supervise(cfg)
}

// supervise hardens PID 1, now in the sandbox's root with the bounding set
// cut and not dumpable, says ready and serves the host on the control
// socket until shutdown. The calling goroutine becomes the spawner; in
// place it is init's, locked to the thread every process must be forked
// from. supervise returns only an error of its start, the process exits
// when serving ends.
func supervise(cfg wire.Config) error {
	os.Unsetenv(EnvStage)
	// Init leads a session of its own, not msb's: CRIU dumps no sandbox
	// whose init's session leader is outside its PID namespace
	// (internal/checkpoint).
	if sid, _ := unix.Getsid(0); sid != os.Getpid() {
		if _, err := unix.Setsid(); err != nil {
			return fmt.Errorf("setsid: %w", err)
		}
	}
	// The control socket came from init's spawn or through exec; no
	// command may inherit it, nor anything else (init closed what msb's
	// caller left open).
	if err := unix.CloseRange(CtlFd, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("marking descriptors close-on-exec: %w", err)
	}
	ctl, err := openCtl()
	if err != nil {
		return err
	}
	if cfg.Session == nil {
		handleSignals()
	} else { // the rest once the session's shell is forked (comeUp)
		defaultSignals()
	}
	if err := harden(&cfg); err != nil {
		return err
	}
	cfg.Stamps = wire.Stamped(cfg.Stamps, StepSupHarden)
	if err := openRoot(); err != nil {
		return err
	}
	if cfg.Workdir != "" {
		if err := os.MkdirAll(cfg.Workdir, 0o755); err != nil {
			return fmt.Errorf("creating workdir %s: %w", cfg.Workdir, err)
		}
	}
	s := &supervisor{cfg: cfg, spawn: newSpawner(), sessions: map[string]*session.Session{},
		running: map[string]map[*wire.Request]inflight{}, gate: make(slots, workSlots)}
	if cfg.Sudo {
		l, err := listenSudo()
		if err != nil {
			return err
		}
		s.sudoLn = l
		go s.serveSudo(l)
	}
	metered := meter{rw: ctlFile{ctl}, moved: &s.trim.moved} // what crosses it decides the trim
	s.out = ctlWriter(metered, &cfg)
	// The rest runs beside the spawner's loop, which starts the session
	// of cfg.Session while the spare threads are made.
	go func() {
		if err := s.comeUp(&cfg); err != nil {
			exit(StageSup, err)
		}
		err := s.serve(metered)
		s.closeAll()
		if errors.Is(err, errShutdown) || errors.Is(err, io.EOF) {
			err = nil
		}
		// Here, not on the spawner's thread, which would first have to
		// be woken: the host waits for this exit.
		exit(StageSup, err)
	}()
	s.spawn.loop()
	return nil
}

// comeUp makes the spare threads, opens cfg.Session and says ready.
//
// The spare threads are made before ready, while nothing of the agent's
// runs: made after it, they raced a fork bomb started by the first
// command for the pids limit, and a runtime that cannot make a thread
// dies. In place, init made them already, while the host attached it to
// its cgroups, unless a session is to be opened: they are then made
// once its shell is forked, while bash starts (~2 ms; the threads take
// 0.5–1 ms, a new thread at a time on the one P), which a shell allows
// because it runs nothing it was given until the session's setup line:
// unless its environment names what bash runs or expands before it reads
// that line (aheadSafe), in which case the threads come first.
func (s *supervisor) comeUp(cfg *wire.Config) error {
	if ss := cfg.Session; ss != nil {
		req := &wire.Request{Session: ss.Name, Env: ss.Env, Dir: ss.Dir}
		opts := s.sessionOptions(req)
		if !aheadSafe(opts.Env) {
			handleSignals()
			prewarmThreads()
		}
		// The threads are made once bash is forked: made before, each
		// new thread's hand-off of the one P delayed the fork.
		forked := make(chan struct{})
		var once sync.Once
		spawn := opts.Start
		opts.Start = func(cmd *exec.Cmd) error {
			defer once.Do(func() { close(forked) })
			return spawn(cmd)
		}
		opened := make(chan error, 1)
		go func() {
			_, err := s.openSession(context.Background(), req, opts)
			opened <- err
		}()
		var err error
		select {
		case <-forked:
			handleSignals() // its threads first: they are not spares
			prewarmThreads()
			err = <-opened
		case err = <-opened: // failed before its fork
		}
		if err != nil {
			return err
		}
		cfg.Stamps = wire.Stamped(cfg.Stamps, StepSupSession)
	}
	handleSignals()
	prewarmThreads()
	if cfg.NoHugePages {
		noHugePages()
		s.trim.noHuge = true
	}
	ready := &wire.Ready{SupervisorPid: os.Getpid(), Stamps: cfg.Stamps}
	if cfg.Disk != nil {
		ready.DiskFd = cfg.Disk.Fd // passed on by an exec too (passDiskFd)
	}
	if err := s.out.Write(wire.Response{Info: ready}); err != nil {
		return fmt.Errorf("reporting ready: %w", err)
	}
	return nil
}

// ctlWriter is the supervisor's writer of frames to the host on w: in
// the encoding the host sent cfg in until a request says otherwise (see
// serve). A host that sent JSON is an older msb's, which reads nothing
// else: a daemon still running when msb-sandbox beside it was replaced,
// whose creates would otherwise fail at the ready answer, the first frame
// the supervisor writes.
func ctlWriter(w io.Writer, cfg *wire.Config) *wire.Writer {
	out := wire.NewWriter(w)
	out.SetBinary(cfg.Binary())
	return out
}

// aheadSafe reports whether a session's shell with environment env runs
// nothing before it reads its first line: no prompt command or prompt
// string (expanded, with command substitution, before the first read), no
// shell options (xtrace expands PS4), no exported functions (which could
// take the setup line's builtins' names).
func aheadSafe(env []string) bool {
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "PROMPT_COMMAND", name == "SHELLOPTS", name == "BASHOPTS",
			len(name) == 3 && strings.HasPrefix(name, "PS") && '0' <= name[2] && name[2] <= '4',
			strings.HasPrefix(name, "BASH_FUNC_"):
			return false
		}
	}
	return true
}

var errShutdown = errors.New("shutdown requested")

// openCtl returns the control socket as the one *os.File of it in this
// process (a second one would close the socket when collected), made
// non-blocking so that the runtime's netpoller waits on it. A goroutine
// blocked in read(2) on it would hold the runtime's only P (GOMAXPROCS=1,
// see RuntimeEnv): the request serve had just handed to a new goroutine
// then waited until sysmon took the P back, two of its ticks (20 µs or
// more each, plus timer slack) into every round trip. The flag belongs to
// this end of the socket alone; the host's end has its own, and no
// process of the sandbox inherits this one (close-on-exec).
func openCtl() (*os.File, error) {
	if err := unix.SetNonblock(CtlFd, true); err != nil {
		return nil, fmt.Errorf("making the control socket non-blocking: %w", err)
	}
	return os.NewFile(CtlFd, "ctl"), nil
}

func (s *supervisor) serve(ctl io.Reader) error {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		// The requests in flight end first: one that waits for the
		// host (an acknowledgement) would keep serve from returning.
		cancel()
		wg.Wait()
	}()
	for {
		var req wire.Request
		if err := wire.ReadFrame(ctl, &req); err != nil {
			return err
		}
		// Answers go in the encoding of the host's last request: a
		// restored supervisor's new host may be an older msb (see
		// wire.BinaryV1).
		s.out.SetBinary(req.Binary())
		if req.Op == wire.OpShutdown {
			s.closeAllKilled()
			resp := wire.Response{ID: req.ID}
			if err := endAll(); err != nil {
				resp.Error = err.Error()
			}
			s.out.Write(resp)
			return errShutdown
		}
		if req.Op == wire.OpStreamAck || req.Op == wire.OpCancel || req.Op == wire.OpAttach {
			s.flows.signal(&req, s.out)
			continue
		}
		if req.ID != wire.AdoptID && req.ID > s.lastID.Load() {
			s.lastID.Store(req.ID) // this loop alone writes it
		}
		rctx := ctx
		if req.Op == wire.OpExec || req.Op == wire.OpSessionExec { // an OpCancel may name it
			rctx = s.flows.open(ctx, &req)
		}
		wg.Add(1)
		s.trim.begin()
		go func() {
			defer wg.Done()
			defer s.trim.end()
			resp := s.handle(rctx, &req)
			resp.ID = req.ID
			s.reply(resp)
		}()
	}
}

// opError carries a wire error code.
type opError struct {
	code string
	err  error
}

func (e *opError) Error() string { return e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

func fail(code string, format string, args ...any) error {
	return &opError{code: code, err: fmt.Errorf(format, args...)}
}

func (s *supervisor) handle(ctx context.Context, req *wire.Request) wire.Response {
	resp, err := s.dispatch(ctx, req)
	if err != nil {
		resp.Error = err.Error()
		var oe *opError
		if errors.As(err, &oe) {
			resp.Code = oe.code
		}
	}
	return resp
}

// fileOp reports whether op is a file operation (read, write, list, tar):
// system calls from start to end, each in a slot of the gate.
func fileOp(op string) bool {
	switch op {
	case wire.OpReadFile, wire.OpWriteFile, wire.OpListDir, wire.OpPutTar, wire.OpGetTar:
		return true
	}
	return false
}

// rootOp reports whether op uses paths of the sandbox's root, which a
// reset must not replace under it: the file operations, and a session's
// open, whose named pipes are made in wire.SessionDir (on /dev, which a
// reset moves to the new root; one made before it is emptied away).
func rootOp(op string) bool {
	return fileOp(op) || op == wire.OpSessionOpen
}

func (s *supervisor) dispatch(ctx context.Context, req *wire.Request) (wire.Response, error) {
	if rootOp(req.Op) {
		s.files.RLock()
		defer s.files.RUnlock()
	}
	if fileOp(req.Op) {
		s.gate.Enter()
		defer s.gate.Leave()
	}
	switch req.Op {
	case wire.OpExec:
		return s.exec(ctx, req)
	case wire.OpRun:
		return s.run(req)
	case wire.OpShell:
		return s.shell(req)
	case wire.OpResize:
		return wire.Response{}, s.resize(req)
	case wire.OpSessionOpen:
		return s.openSession(ctx, req, s.sessionOptions(req))
	case wire.OpSessionExec:
		return s.sessionExec(ctx, req)
	case wire.OpSessionClose:
		return wire.Response{}, s.closeSession(req.Session)
	case wire.OpSessionRename:
		return wire.Response{}, s.renameSession(req.Session, req.To)
	case wire.OpSessionInterrupt:
		return s.interruptSession(req.Session)
	case wire.OpReadFile:
		return readFile(req)
	case wire.OpWriteFile:
		return wire.Response{}, writeFile(req)
	case wire.OpListDir:
		return listDir(req)
	case wire.OpPutTar:
		return wire.Response{}, putTar(req)
	case wire.OpGetTar:
		return getTar(req)
	case wire.OpReset:
		return s.reset(req.Session)
	case wire.OpResetDone:
		return wire.Response{}, s.resetDone()
	case wire.OpDial:
		return s.dial(ctx, req)
	case wire.OpExecs:
		return wire.Response{Execs: &wire.Execs{Last: s.lastID.Load(), Streams: s.flows.list(), Binary: true}}, nil
	}
	return wire.Response{}, fail(wire.CodeInvalid, "unknown op %q", req.Op)
}

func (s *supervisor) sessionOptions(req *wire.Request) session.Options {
	env := s.cfg.Env
	if len(req.Env) > 0 {
		env = envlist.Merge(env, req.Env)
	}
	dir := s.cfg.Workdir
	if req.Dir != "" {
		dir = req.Dir
	}
	shell, env := s.wrap(session.DefaultShell, env)
	return session.Options{Shell: shell, Env: env, Dir: dir, MaxOutput: s.cfg.MaxOutput, ChanDir: wire.SessionDir,
		Start: s.spawn.start, Gate: s.gate}
}

func (s *supervisor) exec(ctx context.Context, req *wire.Request) (wire.Response, error) {
	defer s.flows.close(req.ID) // serve opened it
	if req.Exec == nil {
		return wire.Response{}, fail(wire.CodeInvalid, "%s without a command", req.Op)
	}
	er := *req.Exec
	var f *flow
	if req.Stream {
		f = s.flows.get(req.ID)
		er.OnOutput = func(stderr bool, p []byte) { f.send(ctx, s.out, req.ID, stderr, p) }
	}
	res, err := session.RunOnce(ctx, s.sessionOptions(req), er)
	if f != nil {
		f.drained(ctx) // its unacknowledged output is kept until then (wire.OpAttach)
	}
	if err != nil {
		return wire.Response{}, err
	}
	resp, err := resultResponse(res)
	if f != nil {
		resp.Off = f.total()
	}
	return resp, err
}

func resultResponse(res session.Result) (wire.Response, error) {
	return wire.Response{Result: &res}, nil
}

func (s *supervisor) openSession(ctx context.Context, req *wire.Request, opts session.Options) (wire.Response, error) {
	if req.Session == "" {
		return wire.Response{}, fail(wire.CodeInvalid, "session name is empty")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.From != "" && s.adopt(ctx, req.From, req.Session, opts) {
		return wire.Response{Exit: 1}, nil
	}
	if _, ok := s.liveSession(req.Session); ok {
		return wire.Response{}, fail(wire.CodeExists, "session %q already exists", req.Session)
	}
	sess, err := session.Start(context.WithoutCancel(ctx), req.Session, opts)
	if err != nil {
		return wire.Response{}, err // it names the session
	}
	s.sessions[req.Session] = sess
	return wire.Response{}, nil
}

// adopt makes session from's shell, which ran no command, session
// name's, as a new one with opts would be (session.Session.Adopt), and
// reports whether it did; where it cannot, from is closed. The caller
// holds s.mu.
func (s *supervisor) adopt(ctx context.Context, from, name string, opts session.Options) bool {
	sess, ok := s.liveSession(from)
	if !ok {
		return false
	}
	if _, taken := s.liveSession(name); taken && name != from {
		return false // the open fails: name exists
	}
	delete(s.sessions, from)
	if err := sess.Adopt(context.WithoutCancel(ctx), opts); err != nil {
		sess.Close()
		return false
	}
	sess.Rename(name)
	s.sessions[name] = sess
	return true
}

// renameSession gives session from the name to, which no live session
// has; a session whose shell has ended is not renamed.
func (s *supervisor) renameSession(from, to string) error {
	if to == "" {
		return fail(wire.CodeInvalid, "new session name is empty")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.liveSession(from)
	if !ok {
		return fail(wire.CodeNotFound, "no session %q", from)
	}
	if _, ok := s.liveSession(to); ok {
		return fail(wire.CodeExists, "session %q already exists", to)
	}
	delete(s.sessions, from)
	sess.Rename(to)
	s.sessions[to] = sess
	if r, ok := s.running[from]; ok {
		delete(s.running, from)
		s.running[to] = r
	}
	return nil
}

// liveSession is session name if its shell is alive; one whose shell has
// ended is closed and forgotten. The caller holds s.mu.
func (s *supervisor) liveSession(name string) (*session.Session, bool) {
	sess, ok := s.sessions[name]
	if ok && !sess.Alive() {
		sess.Close()
		delete(s.sessions, name)
		return nil, false
	}
	return sess, ok
}

func (s *supervisor) session(name string) (*session.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[name]
	if !ok {
		return nil, fail(wire.CodeNotFound, "no session %q", name)
	}
	return sess, nil
}

func (s *supervisor) sessionExec(ctx context.Context, req *wire.Request) (wire.Response, error) {
	defer s.flows.close(req.ID) // serve opened it
	sess, err := s.session(req.Session)
	if err != nil {
		return wire.Response{}, err
	}
	if req.Exec == nil {
		return wire.Response{}, fail(wire.CodeInvalid, "%s without a command", req.Op)
	}
	er := *req.Exec
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s.mu.Lock()
	running := s.running[req.Session] // a rename moves this map
	if running == nil {
		running = map[*wire.Request]inflight{}
		s.running[req.Session] = running
	}
	done := make(chan struct{})
	running[req] = inflight{interrupt: func() { cancel(errInterrupted) }, done: done}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(running, req)
		s.mu.Unlock()
		close(done)
	}()
	// A reset holds the command back until it is done, as file
	// operations: the shell it keeps (keptShell, which sees the command
	// in running) must not run one while the root is replaced.
	s.files.RLock()
	s.files.RUnlock()
	res, err := sess.Exec(ctx, er)
	if err != nil && res.TimedOut && errors.Is(context.Cause(ctx), errInterrupted) {
		return resultResponse(res) // interrupted while running: the output so far
	}
	if errors.Is(err, session.ErrSessionEnded) {
		return wire.Response{}, fail(wire.CodeSessionEnded, "session %q has ended; open a new one", req.Session)
	}
	if errors.Is(err, session.ErrInvalidCommand) || errors.Is(err, session.ErrNotInteractive) ||
		errors.Is(err, session.ErrInteractiveRunning) || errors.Is(err, session.ErrNoTerminal) {
		return wire.Response{}, &opError{code: wire.CodeInvalid, err: err}
	}
	if err != nil {
		return wire.Response{}, err
	}
	return resultResponse(res)
}

// errInterrupted is the cause of an exec context ended by OpSessionInterrupt.
var errInterrupted = errors.New("interrupted")

// inflight is a session's exec in flight: how to interrupt it, and a
// channel closed once it has returned (its command ended).
type inflight struct {
	interrupt func()
	done      <-chan struct{}
}

// interruptWait bounds how long an interrupt waits for the execs it
// interrupted to return: past the session's kill grace (SIGINT, then
// SIGKILL after 2 s by default) and the kill of what the command left.
const interruptWait = 10 * time.Second

func (s *supervisor) interruptSession(name string) (wire.Response, error) {
	s.mu.Lock()
	sess, ok := s.sessions[name]
	if !ok {
		s.mu.Unlock()
		return wire.Response{}, fail(wire.CodeNotFound, "no session %q", name)
	}
	var done []<-chan struct{}
	for _, r := range s.running[name] {
		r.interrupt()
		done = append(done, r.done)
	}
	n := len(done)
	s.mu.Unlock()
	// Answer once they have returned, their commands ended: a caller told
	// a command was interrupted finds nothing of it running.
	timeout := time.NewTimer(interruptWait)
	defer timeout.Stop()
	for _, d := range done {
		select {
		case <-d:
		case <-timeout.C:
			return wire.Response{Exit: n}, nil
		}
	}
	if n == 0 && sess.Interactive() {
		// An interactive command waiting for input: interrupt it and wait
		// for its end. Its last output goes unread, as the caller chose.
		if _, err := sess.Exec(context.Background(), session.ExecRequest{Input: true, Interrupt: true}); err == nil {
			n = 1
		}
	}
	return wire.Response{Exit: n}, nil
}

func (s *supervisor) closeSession(name string) error {
	s.mu.Lock()
	sess, ok := s.sessions[name]
	delete(s.sessions, name)
	s.mu.Unlock()
	if !ok {
		return fail(wire.CodeNotFound, "no session %q", name)
	}
	return sess.Close()
}

func (s *supervisor) closeAll() { s.closeAllBut("") }

// closeAllBut closes every session but keep.
func (s *supervisor) closeAllBut(keep string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, sess := range s.sessions {
		if name == keep && keep != "" {
			continue
		}
		sess.Close()
		delete(s.sessions, name)
	}
}

// closeAllKilled kills every other process of the namespace, which endAll
// then reaps, and closes every session without searching /proc for its
// processes (session.CloseKilled). The processes are stopped before they
// are killed, as killTree does: a shell that outlived its command's
// SIGKILL would report that command's end as its own.
func (s *supervisor) closeAllKilled() {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []*session.Session
	for name, sess := range s.sessions {
		all = append(all, sess)
		delete(s.sessions, name)
	}
	session.CloseKilled(all, func() {
		unix.Kill(-1, unix.SIGSTOP)
		unix.Kill(-1, unix.SIGKILL)
	})
}

// endAll kills every other process of the sandbox, waits until none is
// left, and lets go of the host's stdio pipes. The answer to shutdown then
// tells the host that the sandbox's processes are gone and all they wrote
// is in the pipes, while PID 1's own exit (its memory torn down, ~1 ms)
// runs after Close returned.
func endAll() error {
	for {
		// Every process of the namespace but PID 1, again after each reap:
		// one forked meanwhile escaped the previous round.
		unix.Kill(-1, unix.SIGKILL)
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WALL, nil)
		if errors.Is(err, unix.ECHILD) {
			break
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("reaping the sandbox's processes: %w", err)
		}
	}
	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening /dev/null: %w", err)
	}
	defer unix.Close(null)
	for fd := 0; fd <= 2; fd++ {
		if err := unix.Dup3(null, fd, 0); err != nil {
			return fmt.Errorf("letting go of stdio %d: %w", fd, err)
		}
	}
	return nil
}
