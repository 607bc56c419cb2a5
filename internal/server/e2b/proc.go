package e2b

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process"
)

// maxLog bounds the output a process keeps for streams that have not
// read it yet; past it the oldest output is dropped.
const maxLog = 1 << 20

// endedKeep is how long an ended process stays, so that a client that
// reconnects still gets its exit and the output no stream sent.
const endedKeep = 5 * time.Minute

// proc is a process started through Start. It runs on its own, apart from
// the stream that started it, until it exits or is signalled, and keeps
// its events (output, then its end) in a bounded log numbered from 0:
// every stream reads the log from an offset, so a client that reconnects
// reads from where the last stream left off.
type proc struct {
	pid    uint32
	tag    string
	config *process.ProcessConfig
	// key is the engine's name for the command that runs it
	// (ExecStreamKeyed): its own, or its primed shell's, which hand
	// sets with mu held. A sandbox resumed with its processes lists it
	// (pause.go).
	key   string
	live  *atomic.Int64     // its sandbox's count of processes not ended (box.live); nil: none
	stdin *stdinPipe        // nil: started without stdin
	pty   *process.PTY_Size // nil: no terminal; else its size at the start
	user  *sysUser          // who it runs as (users.go); nil: the sandbox's user

	mu     sync.Mutex         // guards the fields below
	cancel context.CancelFunc // ends its run (stop)
	log    []*process.ProcessEvent
	first  int64 // the offset of log[0]
	size   int   // output bytes in log
	sent   int64 // the first offset no stream has sent
	// out is the command's output so far, stdout and stderr together:
	// the offset in it where the log's output ends.
	out   int64
	ended bool
	lost  bool // its sandbox was killed under it: it has no end event
	// epoch numbers its runs: a pause that keeps it ends the run of
	// its paused sandbox, whose output and end then count no more
	// (pause.go), and its resumed sandbox's run has the next.
	epoch int
	// held is set while a pause is taken (pause.go): the log offset
	// past which no stream sends, and an end waits in late; -1: none.
	held int64
	// late is the end its run met while held or since its epoch passed
	// (nil: none or an error): its true end if its command is not
	// among those its resumed sandbox runs on. finishLate ends it as
	// finish would, for a pause that kept no processes.
	late       *process.ProcessEvent
	finishLate func()
	suspended  bool // its sandbox is paused with it: streams end, none sends
	// runDone is closed once the run of epoch runEpoch has returned
	// (finish); nil after.
	runDone  chan struct{}
	runEpoch int
	changed  chan struct{} // closed when the log grows or the process ends
}

func newProc(pid uint32, tag string, cfg *process.ProcessConfig, cancel context.CancelFunc) *proc {
	return &proc{pid: pid, tag: tag, config: cfg, cancel: cancel, held: -1, key: "e2b-" + newToken(),
		runDone: make(chan struct{}), changed: make(chan struct{})}
}

// stop ends the process's run: the engine interrupts its command.
func (p *proc) stop() {
	p.mu.Lock()
	cancel := p.cancel
	p.mu.Unlock()
	cancel()
}

// add appends ev to the log, dropping the oldest output past maxLog.
func (p *proc) add(ev *process.ProcessEvent, end bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addLocked(ev, end)
}

// addLocked is add with p.mu held.
func (p *proc) addLocked(ev *process.ProcessEvent, end bool) {
	p.log = append(p.log, ev)
	p.size += dataLen(ev)
	for p.size > maxLog && len(p.log) > 1 {
		p.size -= dataLen(p.log[0])
		p.log[0] = nil
		p.log = p.log[1:]
		p.first++
	}
	if end {
		p.end()
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// end marks p ended, once. The caller holds p.mu.
func (p *proc) end() {
	if p.ended {
		return
	}
	p.ended = true
	if p.live != nil {
		p.live.Add(-1)
	}
}

func dataLen(ev *process.ProcessEvent) int {
	d := ev.GetData()
	return len(d.GetStdout()) + len(d.GetStderr()) + len(d.GetPty())
}

// resumeAt is where a stream that connects now starts: the first event no
// stream has sent (or the oldest one kept), or the end of an ended
// process, which every stream gets.
func (p *proc) resumeAt() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	at := max(p.sent, p.first)
	if last := p.first + int64(len(p.log)); p.ended && !p.lost && at == last {
		at = last - 1
	}
	return at
}

// follow sends the log's events from offset from until the process's end
// is sent (nil), send fails or ctx ends.
func (p *proc) follow(ctx context.Context, from int64, send func(*process.ProcessEvent) error) error {
	for {
		p.mu.Lock()
		if p.suspended {
			p.mu.Unlock()
			return errSandboxPaused
		}
		from = max(from, p.first)
		upto := p.first + int64(len(p.log))
		if p.held >= 0 {
			upto = max(min(upto, p.held), from)
		}
		evs := append([]*process.ProcessEvent(nil), p.log[from-p.first:upto-p.first]...)
		ended, lost, changed := p.ended && p.held < 0, p.lost, p.changed
		p.mu.Unlock()
		for _, ev := range evs {
			if err := ctx.Err(); err != nil { // a client gone: leave the rest to the next
				return err
			}
			if err := send(ev); err != nil {
				return err
			}
			from++
			p.mu.Lock()
			p.sent = max(p.sent, from)
			p.mu.Unlock()
		}
		if ended && len(evs) == 0 {
			if lost {
				return errSandboxKilled
			}
			p.trim()
			return nil
		}
		if len(evs) > 0 {
			continue // the process may have ended or grown meanwhile
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// run runs the process to its end in sb (finish); cancel ends ctx.
func (f *Front) run(ctx context.Context, cancel context.CancelFunc, b *box, sb *engine.Sandbox, p *proc) {
	defer cancel()
	testHookRun()
	res, err := sb.ExecStreamKeyed(ctx, p.key, p.request(), p.emitter(0))
	f.finish(ctx, b, sb, p, 0, res, err)
}

// testHookRun, in tests, runs before a process's command is sent to
// its sandbox.
var testHookRun = func() {}

// emitter is output for p's run of epoch epoch: nothing once that epoch
// has passed.
func (p *proc) emitter(epoch int) func(stderr bool, b []byte) {
	return func(stderr bool, b []byte) { p.output(epoch, stderr, b) }
}

// output logs a read of the command's output as the bytes it wrote:
// envd's process stream carries bytes, which the SDK decodes (showing
// U+FFFD for what is not UTF-8), so the engine's \xNN text for such a
// byte would reach the client as four characters.
func (p *proc) output(epoch int, stderr bool, b []byte) {
	b = bytes.Clone(b) // the engine reuses it
	data := &process.ProcessEvent_DataEvent{}
	switch {
	case p.pty != nil:
		data.Output = &process.ProcessEvent_DataEvent_Pty{Pty: b}
	case stderr:
		data.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: b}
	default:
		data.Output = &process.ProcessEvent_DataEvent_Stdout{Stdout: b}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if epoch != p.epoch {
		return
	}
	p.out += int64(len(b))
	p.addLocked(&process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: data}}, false)
}

// finish logs the end of p, whose command ended with res or err (ctx is
// the one it ran under), and forgets it endedKeep later (keeping only its
// end if every event was sent). Before the end is logged, so before the
// client learns of it, the sandbox gets a primed shell for the next
// command of p's shape (prime). The end of a run whose epoch has passed,
// or that comes while a pause is taken, waits in p.late (pause.go).
func (f *Front) finish(ctx context.Context, b *box, sb *engine.Sandbox, p *proc, epoch int, res api.ExecResult, err error) {
	p.mu.Lock()
	if epoch == p.runEpoch && p.runDone != nil {
		close(p.runDone)
		p.runDone = nil
	}
	if epoch != p.epoch || p.held >= 0 {
		if err == nil && p.late == nil && (epoch == p.epoch || p.suspended && epoch == p.epoch-1) {
			p.late = endEvent(int32(res.ExitCode), fmt.Sprintf("exit status %d", res.ExitCode), "")
		}
		if epoch == p.epoch {
			p.finishLate = func() { f.finish(ctx, b, sb, p, epoch, res, err) }
		}
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	if p.stdin != nil {
		p.stdin.remove(sb)
	}
	var startPrimed func()
	if err == nil {
		startPrimed = f.prime(b, sb, p)
	}
	switch {
	case err != nil && ctx.Err() != nil && b.isClosed():
		p.lose()
	case err != nil && ctx.Err() != nil: // signalled, or the sandbox is pausing
		p.add(endEvent(-1, "signal: killed", ""), true)
	case err != nil:
		p.add(endEvent(-1, "error", err.Error()), true)
	default:
		p.add(endEvent(int32(res.ExitCode), fmt.Sprintf("exit status %d", res.ExitCode), ""), true)
	}
	if startPrimed != nil {
		startPrimed() // after the end event, which the stream sends meanwhile
	}
	if err != nil {
		b.logf("warn", []string{"pid", fmt.Sprint(p.pid)}, "process %d ended: %v", p.pid, err)
	} else {
		b.logf("info", []string{"pid", fmt.Sprint(p.pid)}, "process %d ended: exit status %d", p.pid, res.ExitCode)
	}
	p.trim()
	f.forgetLater(b, p)
}

// forgetLater forgets ended p endedKeep from now.
func (f *Front) forgetLater(b *box, p *proc) {
	time.AfterFunc(endedKeep, func() {
		b.mu.Lock()
		if b.procs[p.pid] == p {
			delete(b.procs, p.pid)
		}
		b.mu.Unlock()
	})
}

// shape is what a primed shell that can run p's command must have run
// before it: the login prelude (loginPrelude) as p's user (asUser), so
// that a shell primed for one user never serves another; "" when no
// primed shell can run it (stdin, a terminal, a command a pipe does not
// take in one write).
func (p *proc) shape() string {
	prelude, ok := loginPrelude(p.config)
	if !ok || p.stdin != nil || p.pty != nil || len(p.config.GetArgs()[2]) > maxPrimedCommand {
		return ""
	}
	return asUser(p.user, prelude)
}

// request is the engine's one-shot command that runs p: the SDK's usual
// bash -l -c in the engine's fresh bash itself (loginScript), anything
// else exec'd from it, wrapped for a terminal and for stdin.
func (p *proc) request() api.ExecRequest {
	if script, ok := loginScript(p.config); ok && p.stdin == nil && p.pty == nil {
		return api.ExecRequest{Command: asUser(p.user, script), SeparateStderr: true}
	}
	cmd := asUser(p.user, commandOf(p.config))
	if p.pty != nil {
		cmd = ptyWrap(cmd, p.stdin, p.pty)
	}
	if p.stdin != nil {
		cmd = p.stdin.wrap(cmd)
	}
	xr := api.ExecRequest{Command: cmd, SeparateStderr: true}
	if cwd := p.config.GetCwd(); cwd != "" {
		xr.Cwd = abs(cwd) // a relative cwd starts at the home directory, as on E2B
	}
	for k, v := range p.config.GetEnvs() {
		xr.Env = append(xr.Env, k+"="+v)
	}
	return xr
}

// trim drops the output of an ended process whose every event was sent,
// keeping its end for a client that connects later.
func (p *proc) trim() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.log); p.ended && !p.lost && p.sent == p.first+int64(n) {
		p.first += int64(n - 1)
		p.log = []*process.ProcessEvent{p.log[n-1]}
		p.size = 0
	}
}

func endEvent(code int32, status, msg string) *process.ProcessEvent {
	end := &process.ProcessEvent_EndEvent{ExitCode: code, Exited: true, Status: status}
	if msg != "" {
		end.Error = &msg
	}
	return &process.ProcessEvent{Event: &process.ProcessEvent_End{End: end}}
}

// errSandboxKilled ends the streams of a process whose sandbox was killed
// while it ran: as on E2B, where envd's connection drops with the
// sandbox, the stream fails UNAVAILABLE without an end event, and the SDK
// then probes the sandbox's health and, finding it gone, raises
// SandboxNotRunningException.
var errSandboxKilled = connect.NewError(connect.CodeUnavailable,
	errors.New("the connection to the sandbox ended before the stream completed: the sandbox was killed"))

// signalWait bounds SendSignal's wait for the process's end: past the
// engine's kill grace (SIGINT, then SIGKILL after 2 s by default) and its
// wait for the kill's answer (10 s for a sandbox that cannot answer).
const signalWait = 15 * time.Second

// awaitEnd waits until p has ended (or was lost with its sandbox), and
// reports whether it did before ctx or wait ended.
func (p *proc) awaitEnd(ctx context.Context, wait time.Duration) bool {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		p.mu.Lock()
		ended, changed := p.ended, p.changed
		p.mu.Unlock()
		if ended {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		case <-timer.C:
			return false
		}
	}
}

// lose ends p without an end event: its sandbox was killed under it.
func (p *proc) lose() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.end()
	p.lost = true
	close(p.changed)
	p.changed = make(chan struct{})
}

// errNoStdin: input for a process started without stdin.
var errNoStdin = errors.New("the process was started without stdin (stdin=True)")

// stdinPipe is a process's standard input: a FIFO in the sandbox, made
// before the command starts, that the command reads and that a holder
// process keeps open for writing until CloseStdin kills it, so that the
// command sees end of file only then. Each input is written to the FIFO
// by a one-shot command, once the command has opened it (f.ready).
type stdinPipe struct {
	path string
	mu   sync.Mutex // one writer at a time keeps inputs in order
}

// makeStdin makes a FIFO for a new process's stdin in sb.
func makeStdin(ctx context.Context, sb *engine.Sandbox) (*stdinPipe, error) {
	s := &stdinPipe{path: "/tmp/.msb-e2b-stdin-" + newToken()}
	if err := s.run(ctx, sb, api.ExecRequest{Command: "mkfifo -m 600 " + shellWord(s.path)}); err != nil {
		return nil, fmt.Errorf("making the stdin of a process: %w", err)
	}
	return s, nil
}

// wrap is cmd reading the FIFO. The holder outlives the command's shell
// only until the engine kills what a one-shot command leaves behind.
func (s *stdinPipe) wrap(cmd string) string {
	f := shellWord(s.path)
	return "sleep infinity 1<>" + f + " 2>/dev/null </dev/null & echo $! >" + f + ".hold\n" +
		"(touch " + f + ".ready; " + cmd + ") <" + f
}

// waitReady is shell that waits until the command has opened the FIFO,
// or exits 3 when it is gone.
func (s *stdinPipe) waitReady() string {
	f := shellWord(s.path)
	return "while [ ! -e " + f + ".ready ]; do [ -p " + f + " ] || exit 3; sleep 0.005; done; "
}

// write sends data to the command's stdin. Opening the FIFO read-write
// never blocks, whether or not the command still reads it.
func (s *stdinPipe) write(ctx context.Context, sb *engine.Sandbox, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run(ctx, sb, api.ExecRequest{Command: s.waitReady() + "exec 3<>" + shellWord(s.path) + "; cat >&3", Stdin: string(data)})
}

// close ends the command's stdin: the holder exits, and once the command
// has read what was written it reads end of file.
func (s *stdinPipe) close(ctx context.Context, sb *engine.Sandbox) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run(ctx, sb, api.ExecRequest{Command: s.waitReady() + "kill $(cat " + shellWord(s.path+".hold") + ")"})
}

// remove deletes the FIFO and its marks once the command has ended.
func (s *stdinPipe) remove(sb *engine.Sandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f := shellWord(s.path)
	s.run(ctx, sb, api.ExecRequest{Command: "rm -f " + f + " " + f + ".hold " + f + ".ready " + shellWord(ttyFile(s))})
}

func (s *stdinPipe) run(ctx context.Context, sb *engine.Sandbox, req api.ExecRequest) error {
	res, err := sb.Exec(ctx, req)
	if err != nil {
		return err
	}
	switch res.ExitCode {
	case 0:
		return nil
	case 3:
		return fmt.Errorf("the process's stdin is gone: %w", engine.ErrNotFound)
	}
	return fmt.Errorf("the process's stdin: exit %d: %s", res.ExitCode, res.Stdout)
}
