package e2b

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process"
)

// Processes across a pause that keeps them (snapshots.go, pauseLocked):
// the engine dumps the sandbox with the commands that run its processes
// in flight, each started under the process's key (proc.key,
// engine.Sandbox.ExecStreamKeyed), and the sandbox resumed from the dump
// runs them on and lists them by key (RestoredExecs), each with the
// output its supervisor had sent when dumped. A process of the front end
// is held while the pause is taken (no stream sends what comes then, and
// an end waits), then suspended: the run in the paused sandbox counts no
// more (its epoch passed), its streams end as on E2B, where envd's
// connection drops with a paused sandbox, and it stays in the sandbox's
// table, in the paused sandbox's record too (records.go). The resume
// reattaches each listed process (AttachExec): its log is cut back to
// what the restored command had sent (the paused sandbox ran a little
// past its dump), and the restored command's output follows from there,
// so a stream reads on from where the last one left off, nothing lost or
// twice. A process not listed had ended before the dump: its end is the
// one its run met (late), or says the end was lost.

// errSandboxPaused ends the streams of a process whose sandbox was
// paused with it: the connection drops, as envd's on E2B.
var errSandboxPaused = connect.NewError(connect.CodeUnavailable,
	errors.New("the connection to the sandbox ended before the stream completed: the sandbox was paused"))

// holdProcs holds b's processes that have not ended while a pause is
// taken, and returns them; no process starts until pauseOver (launch
// waits).
func (b *box) holdProcs() []*proc {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pausing = make(chan struct{})
	var held []*proc
	for _, p := range b.procs {
		p.mu.Lock()
		if !p.ended && !p.suspended {
			p.held = p.first + int64(len(p.log))
			held = append(held, p)
		}
		p.mu.Unlock()
	}
	return held
}

// pauseOver ends the pause holdProcs began: processes start again.
func (b *box) pauseOver() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pausing != nil {
		close(b.pausing)
		b.pausing = nil
	}
}

// beginStart counts a Start at work in b's sandbox, which the pause
// that comes next waits for (awaitStarts), unless a pause is being
// taken: then it returns that pause's channel, closed when it is over,
// and counts nothing. endStart ends what it counted.
func (b *box) beginStart() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pausing != nil {
		return b.pausing
	}
	b.starting++
	return nil
}

func (b *box) endStart() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.starting--
}

// startsWait bounds a pause's wait for the commands of the processes it
// holds to reach the sandbox (awaitStarts).
const startsWait = 10 * time.Second

// errStartsPending fails a pause whose held processes' commands did not
// all reach the sandbox in startsWait: the dump would not carry them.
var errStartsPending = errors.New("a process started just before the pause has not started in the sandbox")

// awaitStarts waits until the Starts at work in b's sandbox sb have
// left it (beginStart) and the command of each of held, b's processes
// the pause holds, is one sb runs (engine.Sandbox.KeyedExecs) or has
// ended: a process whose start event was sent but whose command was
// still on its way to the sandbox (launch runs it apart, f.run) would be
// missing from the dump, and its end lost with the pause; and a Start's
// work in the sandbox (its user's lookup, its stdin) must not run into
// the dump. No process starts meanwhile (holdProcs).
func awaitStarts(ctx context.Context, b *box, sb *engine.Sandbox, held []*proc) error {
	ctx, cancel := context.WithTimeout(ctx, startsWait)
	defer cancel()
	for {
		b.mu.Lock()
		pending := b.starting
		b.mu.Unlock()
		running := map[string]bool{}
		if pending == 0 && len(held) > 0 {
			keys, err := sb.KeyedExecs(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("%w in %v", errStartsPending, startsWait)
				}
				return fmt.Errorf("listing the sandbox's commands before the pause: %w", err)
			}
			for _, k := range keys {
				running[k] = true
			}
		}
		for _, p := range held {
			p.mu.Lock()
			// runDone is nil once the run has returned; late is an end
			// that came while held.
			if !running[p.key] && !p.ended && p.late == nil && p.runDone != nil {
				pending++
			}
			p.mu.Unlock()
		}
		if pending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w in %v (%d of them)", errStartsPending, startsWait, pending)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// unhold lets go of processes a pause held and did not keep (it failed,
// or kept files only): their streams go on, and an end that came
// meanwhile is logged.
func unhold(procs []*proc) {
	for _, p := range procs {
		p.mu.Lock()
		p.held = -1
		fin := p.finishLate
		p.late, p.finishLate = nil, nil
		p.wake()
		p.mu.Unlock()
		if fin != nil {
			fin()
		}
	}
}

// suspend marks held processes kept by the pause: their run in the
// paused sandbox counts no more, and their streams end. It returns
// channels closed once those runs have returned.
func suspend(procs []*proc) []<-chan struct{} {
	var runs []<-chan struct{}
	for _, p := range procs {
		p.mu.Lock()
		p.epoch++
		p.held, p.suspended, p.finishLate = -1, true, nil
		if p.runDone != nil {
			runs = append(runs, p.runDone)
		}
		p.wake()
		p.mu.Unlock()
	}
	return runs
}

// wake wakes p's streams. The caller holds p.mu.
func (p *proc) wake() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// suspendedProcs are b's processes its pause kept.
func (b *box) suspendedProcs() []*proc {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*proc
	for _, p := range b.procs {
		p.mu.Lock()
		if p.suspended {
			out = append(out, p)
		}
		p.mu.Unlock()
	}
	return out
}

// reattach gives b's suspended processes to sb, its sandbox resumed
// with its processes: each listed by sb runs on there; one not listed
// ends. A command sb runs that no process is (a primed shell that
// waited) is interrupted.
func (f *Front) reattach(b *box, sb *engine.Sandbox) {
	restored := map[string]int64{}
	for _, e := range sb.RestoredExecs() {
		restored[e.Key] = e.Sent
	}
	for _, p := range b.suspendedProcs() {
		p.mu.Lock()
		key := p.key
		p.mu.Unlock()
		sent, ok := restored[key]
		delete(restored, key)
		if !ok {
			f.endSuspended(b, p, endEvent(-1, "error", "the process's end was lost with its sandbox's pause"))
			continue
		}
		if p.pty != nil {
			f.endTerminal(b, sb, p, key)
			continue
		}
		ctx, cancel, epoch, from := p.resume(sent)
		b.logf("info", []string{"pid", fmt.Sprint(p.pid)}, "process %d resumed with its sandbox", p.pid)
		go func() {
			defer cancel()
			res, err := sb.AttachExec(ctx, key, from, p.emitter(epoch))
			f.finish(ctx, b, sb, p, epoch, res, err)
		}()
	}
	for key := range restored {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		go sb.AttachExec(ctx, key, 0, func(bool, []byte) {})
	}
}

// errTerminalNotCarried is the end of a terminal (pty.create) whose
// sandbox was resumed with its processes: the terminal's proxy, util-linux
// script(1) in the sandbox (pty.go), ends its loop when its poll returns
// nothing, which a poll interrupted by the dump does in the restored
// sandbox, so the terminal would close by itself a moment after the
// resume. It is ended at once instead, saying so; the sandbox's other
// processes go on, and a new terminal works.
const errTerminalNotCarried = "the terminal was not carried across the sandbox's pause: " +
	"its pty proxy (script) does not survive a restore; start a new one"

// endTerminal ends p, a terminal kept by the pause, in sb, its sandbox
// resumed with its processes: its restored command (key) is interrupted,
// its stdin removed, and its streams get the end errTerminalNotCarried
// (exit -1), unless it had ended before the dump.
func (f *Front) endTerminal(b *box, sb *engine.Sandbox, p *proc, key string) {
	b.logf("warn", []string{"pid", fmt.Sprint(p.pid)}, "process %d: %s", p.pid, errTerminalNotCarried)
	f.endSuspended(b, p, endEvent(-1, "error", errTerminalNotCarried))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	go func() {
		sb.AttachExec(ctx, key, 0, func(bool, []byte) {})
		if p.stdin != nil {
			p.stdin.remove(sb)
		}
	}()
}

// endSuspended ends p, suspended by a pause, with the end its run met
// before the dump if it did (late), else ev.
func (f *Front) endSuspended(b *box, p *proc, ev *process.ProcessEvent) {
	p.mu.Lock()
	if p.late != nil {
		ev = p.late
	}
	p.suspended, p.late = false, nil
	p.addLocked(ev, true)
	p.mu.Unlock()
	b.logf("info", []string{"pid", fmt.Sprint(p.pid)}, "process %d ended with its sandbox's pause: %s", p.pid, ev.GetEnd().GetStatus())
	p.trim()
	f.forgetLater(b, p)
}

// resume makes suspended p a process of its resumed sandbox, whose
// restored command had sent sent bytes of output: the log is cut back
// to that (what the paused sandbox ran past its dump is not the
// restored command's), and the new run's context, epoch and the offset
// it reads on from are returned.
func (p *proc) resume(sent int64) (ctx context.Context, cancel context.CancelFunc, epoch int, from int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutTo(min(p.out, sent))
	ctx, cancel = context.WithCancel(context.Background())
	p.cancel, p.suspended, p.late = cancel, false, nil
	p.runDone = make(chan struct{})
	p.runEpoch = p.epoch
	p.wake()
	return ctx, cancel, p.epoch, p.out
}

// cutTo drops the log's output past offset out of the command's
// output, never what a stream has sent. The caller holds p.mu.
func (p *proc) cutTo(out int64) {
	for n := len(p.log); n > 0 && p.first+int64(n) > p.sent && p.out > out; n = len(p.log) {
		ev := p.log[n-1]
		size := int64(dataLen(ev))
		if p.out-size >= out {
			p.log = p.log[:n-1]
			p.out -= size
			p.size -= int(size)
			continue
		}
		keep := size - (p.out - out)
		p.log[n-1] = cutData(ev, keep)
		p.size -= int(p.out - out)
		p.out = out
	}
}

// cutData is data event ev with its first keep bytes only.
func cutData(ev *process.ProcessEvent, keep int64) *process.ProcessEvent {
	d := ev.GetData()
	out := &process.ProcessEvent_DataEvent{}
	switch {
	case d.GetPty() != nil:
		out.Output = &process.ProcessEvent_DataEvent_Pty{Pty: d.GetPty()[:keep]}
	case d.GetStderr() != nil:
		out.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: d.GetStderr()[:keep]}
	default:
		out.Output = &process.ProcessEvent_DataEvent_Stdout{Stdout: d.GetStdout()[:keep]}
	}
	return &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: out}}
}

// runsWait bounds a pause's wait for the runs of the processes it kept
// to return once their sandbox is closed: what they met is recorded.
const runsWait = 10 * time.Second

// awaitRuns waits for runs, at most runsWait.
func awaitRuns(runs []<-chan struct{}) {
	timer := time.NewTimer(runsWait)
	defer timer.Stop()
	for _, r := range runs {
		select {
		case <-r:
		case <-timer.C:
			return
		}
	}
}

// procRecord is a process a pause kept, as a paused sandbox's record
// has it: what list shows, what its streams have not sent yet, and what
// the resumed sandbox's command is known by.
type procRecord struct {
	PID    uint32            `json:"pid"`
	Tag    string            `json:"tag,omitempty"`
	Key    string            `json:"key"`
	Cmd    string            `json:"cmd"`
	Args   []string          `json:"args,omitempty"`
	Envs   map[string]string `json:"envs,omitempty"`
	Cwd    *string           `json:"cwd,omitempty"`
	Stdin  string            `json:"stdin,omitempty"` // its stdin FIFO in the sandbox ("": none)
	PTY    *[2]uint32        `json:"pty,omitempty"`   // its terminal's cols and rows
	User   *userRecord       `json:"user,omitempty"`
	Out    int64             `json:"out"` // the command's output the log ends at
	Output []outputRecord    `json:"output,omitempty"`
	// LateExit is the exit code its run met (proc.late).
	LateExit *int32 `json:"lateExit,omitempty"`
}

type userRecord struct {
	Name string `json:"name"`
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	Home string `json:"home"`
}

// outputRecord is one read of output no stream has sent.
type outputRecord struct {
	Stream string `json:"stream"` // stdout, stderr or pty
	Data   []byte `json:"data"`
}

// record is suspended p as a record. The caller holds p.mu.
func (p *proc) record() procRecord {
	c := p.config
	r := procRecord{PID: p.pid, Tag: p.tag, Key: p.key, Cmd: c.GetCmd(), Args: c.GetArgs(), Envs: c.GetEnvs(), Cwd: c.Cwd, Out: p.out}
	if p.stdin != nil {
		r.Stdin = p.stdin.path
	}
	if p.pty != nil {
		r.PTY = &[2]uint32{p.pty.GetCols(), p.pty.GetRows()}
	}
	if u := p.user; u != nil {
		r.User = &userRecord{Name: u.name, UID: u.uid, GID: u.gid, Home: u.home}
	}
	for _, ev := range p.log[max(p.sent, p.first)-p.first:] {
		d := ev.GetData()
		switch {
		case d == nil:
		case d.GetPty() != nil:
			r.Output = append(r.Output, outputRecord{"pty", d.GetPty()})
		case d.GetStderr() != nil:
			r.Output = append(r.Output, outputRecord{"stderr", d.GetStderr()})
		default:
			r.Output = append(r.Output, outputRecord{"stdout", d.GetStdout()})
		}
	}
	if end := p.late.GetEnd(); end != nil {
		code := end.GetExitCode()
		r.LateExit = &code
	}
	return r
}

// restoredProc is a suspended process of b as its record has it.
func (b *box) restoredProc(r procRecord) *proc {
	cfg := &process.ProcessConfig{Cmd: r.Cmd, Args: r.Args, Envs: r.Envs, Cwd: r.Cwd}
	p := newProc(r.PID, r.Tag, cfg, func() {})
	p.key, p.out, p.suspended, p.epoch, p.live = r.Key, r.Out, true, 1, &b.live
	b.live.Add(1)
	if r.Stdin != "" {
		p.stdin = &stdinPipe{path: r.Stdin}
	}
	if r.PTY != nil {
		p.pty = &process.PTY_Size{Cols: r.PTY[0], Rows: r.PTY[1]}
	}
	if u := r.User; u != nil {
		p.user = &sysUser{name: u.Name, uid: u.UID, gid: u.GID, home: u.Home}
	}
	for _, o := range r.Output {
		data := &process.ProcessEvent_DataEvent{}
		switch o.Stream {
		case "pty":
			data.Output = &process.ProcessEvent_DataEvent_Pty{Pty: o.Data}
		case "stderr":
			data.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: o.Data}
		default:
			data.Output = &process.ProcessEvent_DataEvent_Stdout{Stdout: o.Data}
		}
		p.log = append(p.log, &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: data}})
		p.size += len(o.Data)
	}
	if r.LateExit != nil {
		p.late = endEvent(*r.LateExit, fmt.Sprintf("exit status %d", *r.LateExit), "")
	}
	return p
}
