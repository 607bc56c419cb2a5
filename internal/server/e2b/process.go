package e2b

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process/processconnect"
)

// keepAlive is how often a quiet process's stream carries a keepalive.
const keepAlive = 30 * time.Second

// processService is process.Process over the engine's one-shot commands.
type processService struct {
	f *Front
}

var _ processconnect.ProcessHandler = (*processService)(nil)

// shellWord quotes s for bash.
func shellWord(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// commandOf is the bash source running cfg's argv with exec.
func commandOf(cfg *process.ProcessConfig) string {
	words := []string{"exec", shellWord(cfg.GetCmd())}
	for _, a := range cfg.GetArgs() {
		words = append(words, shellWord(a))
	}
	return strings.Join(words, " ")
}

// loginProfile is what bash reads as a login shell before its command:
// /etc/profile, then the first of the user's profiles that is readable.
// While /etc/profile runs, idFromBash stands in for id.
const loginProfile = `if [ -r /etc/profile ]; then ` + idFromBash + `. /etc/profile; unset -f id; fi; ` +
	`for __msb_p in ~/.bash_profile ~/.bash_login ~/.profile; do if [ -r "$__msb_p" ]; then . "$__msb_p"; break; fi; done; unset __msb_p; `

// idFromBash defines id as a shell function that answers id -u with
// bash's own $EUID, the number the program prints (both are the
// process's geteuid), and runs the program for anything else. Debian's
// /etc/profile runs $(id -u) to choose root's PATH: a program started for
// every command, a fifth of the CPU a commands.run costs the daemon's
// tree (docs/e2b.md, "Latency"). The command substitution still forks;
// the exec and the program's start are what this saves. The function is
// unset after /etc/profile: the user's profiles and the command run the
// program.
const idFromBash = `id() { if [ "$#" = 1 ] && [ "$1" = -u ]; then echo "$EUID"; else command id "$@"; fi; }; `

// loginScript is, for the SDK's commands.run form of cfg (/bin/bash -l
// -c SCRIPT), bash source that runs SCRIPT as that login shell would, in
// the engine's fresh bash itself instead of a second bash exec'd from it:
// one program loaded per command instead of two, a fifth of a command's
// time on a loaded machine (docs/e2b.md, "Latency"). It is loginPrelude,
// then $BASH_EXECUTION_STRING set to SCRIPT (as bash -c sets it), then
// SCRIPT. ok is false for any other command, or an env name bash cannot
// export.
func loginScript(cfg *process.ProcessConfig) (script string, ok bool) {
	prelude, ok := loginPrelude(cfg)
	if !ok {
		return "", false
	}
	cmd := cfg.GetArgs()[2]
	return prelude + "BASH_EXECUTION_STRING=" + ansiWord(cmd) + "; " + cmd, true
}

// loginPrelude is what loginScript runs before SCRIPT, all on line 1 so
// that SCRIPT starts on line 1 (unless an env value holds a newline) and
// its errors read as E2B's: $0 is /bin/bash; cwd, envs and the profile
// come first, in the order envd's login shell meets them; stdin is
// /dev/null, as envd gives a command started without stdin. What differs
// from envd's bash -l: shopt login_shell is off, ~/.bash_logout is not
// read, and id is a function while /etc/profile runs (idFromBash). Two
// commands with the same prelude differ only in SCRIPT: a primed shell
// (primed.go) serves the commands of its prelude.
func loginPrelude(cfg *process.ProcessConfig) (prelude string, ok bool) {
	args := cfg.GetArgs()
	if cfg.GetCmd() != "/bin/bash" || len(args) != 3 || args[0] != "-l" || args[1] != "-c" {
		return "", false
	}
	var b strings.Builder
	b.WriteString("BASH_ARGV0=/bin/bash; exec </dev/null; ")
	if cwd := cfg.GetCwd(); cwd != "" {
		b.WriteString("cd -- " + shellWord(abs(cwd)) + " || exit 1; ") // a relative cwd starts at the home directory, as on E2B
	}
	envs := cfg.GetEnvs()
	for _, k := range slices.Sorted(maps.Keys(envs)) {
		if !envName(k) {
			return "", false // the engine refuses it, as it refuses it for any other command
		}
		b.WriteString("export " + shellWord(k+"="+envs[k]) + "; ")
	}
	b.WriteString(loginProfile)
	return b.String(), true
}

// ansiWord quotes s for bash as one $'...' word on one line: newlines
// are written \n, so the words after it keep their line numbers.
func ansiWord(s string) string {
	return "$'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(s) + "'"
}

// CommandScript is the bash source the front end runs in the engine's
// fresh bash for the SDK's commands.run(cmd) without envs, cwd or stdin:
// the same work for the native API, which msb bench e2b times beside the
// SDK to show what the front end itself adds.
func CommandScript(cmd string) string {
	script, _ := loginScript(&process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", cmd}})
	return script
}

// envName reports whether s is a name bash can export.
func envName(s string) bool {
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// endWriter is the ResponseWriter of a Start or Connect stream (joinEnd):
// once the process's end event is being sent, the stream's last message,
// its flushes do nothing, so that the end event, connect's end of the
// stream and HTTP's last chunk leave together when the handler returns,
// in one write the client reads once, not three.
type endWriter struct {
	http.ResponseWriter
	last atomic.Bool
}

func (w *endWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.last.Load() {
		f.Flush()
	}
}

func (w *endWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type endWriterKey struct{}

// joinEnd gives the Start and Connect streams of h an endWriter.
func joinEnd(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != processconnect.ProcessStartProcedure && r.URL.Path != processconnect.ProcessConnectProcedure {
			h.ServeHTTP(w, r)
			return
		}
		ew := &endWriter{ResponseWriter: w}
		h.ServeHTTP(ew, r.WithContext(context.WithValue(r.Context(), endWriterKey{}, ew)))
	})
}

// streamSender is send for one stream: one Send at a time (events and
// keepalives), a keepalive every keepAlive while ctx lasts. The stream
// ends after the process's end event: that one is not flushed by itself
// (endWriter).
func streamSender(ctx context.Context, send func(*process.ProcessEvent) error) func(*process.ProcessEvent) error {
	var mu sync.Mutex
	ew, _ := ctx.Value(endWriterKey{}).(*endWriter)
	locked := func(ev *process.ProcessEvent) error {
		mu.Lock()
		defer mu.Unlock()
		if ew != nil && ev.GetEnd() != nil {
			ew.last.Store(true)
		}
		return send(ev)
	}
	go func() {
		tick := time.NewTicker(keepAlive)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				locked(&process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}})
			}
		}
	}()
	return locked
}

// launch starts a process in b's sandbox sb, which then runs apart from
// any stream until it ends (proc): in the sandbox's primed shell when it
// has one for the command's shape, else in a shell of its own. While a
// pause is taken (holdProcs) it starts none and returns the pause's
// channel, closed when the pause is over.
func (f *Front) launch(b *box, sb *engine.Sandbox, cfg *process.ProcessConfig, tag string, stdin *stdinPipe, pty *process.PTY_Size, u *sysUser) (*proc, <-chan struct{}) {
	b.mu.Lock()
	if b.pausing != nil {
		defer b.mu.Unlock()
		return nil, b.pausing
	}
	runCtx, cancel := context.WithCancel(context.Background())
	b.next++
	pr := newProc(b.next, tag, cfg, cancel)
	pr.live = &b.live
	b.live.Add(1)
	pr.stdin, pr.pty, pr.user = stdin, pty, u
	pm := b.takePrimed(pr.shape(), sb.ID())
	b.procs[pr.pid] = pr
	b.mu.Unlock()
	pid := []string{"pid", fmt.Sprint(pr.pid)}
	if pm != nil {
		b.logf("info", pid, "process %d started in a primed shell: %s", pr.pid, commandOf(cfg))
		if pm.hand(pr) {
			context.AfterFunc(runCtx, pm.close) // SendSignal, pause and kill cancel runCtx (proc.stop)
			return pr, nil
		}
		pm.close()
		b.logf("info", pid, "process %d: the primed shell had ended; starting one of its own", pr.pid)
	} else {
		b.logf("info", pid, "process %d started: %s", pr.pid, commandOf(cfg))
	}
	go f.run(runCtx, cancel, b, sb, pr)
	return pr, nil
}

func startEvent(pid uint32) *process.ProcessEvent {
	return &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: pid}}}
}

// Start starts the process, which then runs apart from this stream, and
// streams its events from the first. One that comes while its sandbox is
// being paused waits for the pause (launch), then starts, or fails as
// the sandbox was paused.
func (p *processService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	var pr *proc
	for pr == nil {
		var pausing <-chan struct{}
		var err error
		if pr, pausing, err = p.start(ctx, req); err != nil {
			return err
		}
		if pr == nil {
			select {
			case <-pausing:
			case <-ctx.Done():
				return connect.NewError(connect.CodeCanceled, ctx.Err())
			}
			if b, _ := ctx.Value(boxKey{}).(*box); b != nil {
				if _, paused := b.engineID(); paused {
					return errSandboxPaused
				}
			}
		}
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	send := streamSender(ctx, func(ev *process.ProcessEvent) error { return stream.Send(&process.StartResponse{Event: ev}) })
	if err := send(startEvent(pr.pid)); err != nil {
		return err
	}
	return pr.follow(ctx, 0, send)
}

// start launches req's process, or returns the channel of the pause
// being taken, which started none.
func (p *processService) start(ctx context.Context, req *connect.Request[process.StartRequest]) (*proc, <-chan struct{}, error) {
	b, sb, err := p.f.sandboxOf(ctx)
	if err != nil {
		return nil, nil, connectError(err)
	}
	if pausing := b.beginStart(); pausing != nil {
		return nil, pausing, nil
	}
	defer b.endStart()
	cfg := req.Msg.GetProcess()
	if cfg.GetCmd() == "" {
		return nil, nil, connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is empty"))
	}
	u, err := p.f.userOf(ctx, b, sb, rpcUser(req.Header()))
	if err != nil {
		return nil, nil, userError(err)
	}
	var stdin *stdinPipe
	if req.Msg.GetStdin() || req.Msg.Pty != nil { // a terminal's input is the stdin FIFO
		if stdin, err = makeStdin(ctx, sb); err != nil {
			return nil, nil, connectError(err)
		}
	}
	var pty *process.PTY_Size
	if req.Msg.Pty != nil {
		pty = ptySize(req.Msg.GetPty().GetSize())
	}
	pr, pausing := p.f.launch(b, sb, cfg, req.Msg.GetTag(), stdin, pty, u)
	if pr == nil && stdin != nil {
		stdin.remove(sb)
	}
	return pr, pausing, nil
}

// Connect streams a running process's events from where the last stream
// left off: what no stream has sent yet, within the kept log.
func (p *processService) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	b, _, err := p.f.sandboxOf(ctx)
	if err != nil {
		return connectError(err)
	}
	pr, err := find(b, req.Msg.GetProcess())
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	send := streamSender(ctx, func(ev *process.ProcessEvent) error { return stream.Send(&process.ConnectResponse{Event: ev}) })
	if err := send(startEvent(pr.pid)); err != nil {
		return err
	}
	return pr.follow(ctx, pr.resumeAt(), send)
}

func (p *processService) List(ctx context.Context, _ *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	b, _, err := p.f.sandboxOf(ctx)
	if err != nil {
		return nil, connectError(err)
	}
	out := &process.ListResponse{}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, pr := range b.procs {
		pr.mu.Lock()
		ended := pr.ended
		pr.mu.Unlock()
		if ended {
			continue
		}
		info := &process.ProcessInfo{Config: pr.config, Pid: pr.pid}
		if pr.tag != "" {
			info.Tag = &pr.tag
		}
		out.Processes = append(out.Processes, info)
	}
	return connect.NewResponse(out), nil
}

// find is the process sel names.
func find(b *box, sel *process.ProcessSelector) (*proc, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, pr := range b.procs {
		if (sel.GetTag() != "" && pr.tag == sel.GetTag()) || (sel.GetTag() == "" && pr.pid == sel.GetPid()) {
			return pr, nil
		}
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no process %v", sel))
}

func (p *processService) SendSignal(ctx context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	b, _, err := p.f.sandboxOf(ctx)
	if err != nil {
		return nil, connectError(err)
	}
	pr, err := find(b, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	// An ended process is kept for a late Connect only: as envd, which
	// forgets a process when it ends, a signal to it is not_found (the
	// SDKs' kill answers false).
	pr.mu.Lock()
	ended := pr.ended
	pr.mu.Unlock()
	if ended {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process %d has ended", pr.pid))
	}
	pr.stop() // the engine stops the command: SIGINT, then SIGKILL
	// Answer once it is dead, as envd's SIGKILL is at once: a client that
	// kills a process and then looks finds nothing of it running.
	if !pr.awaitEnd(ctx, signalWait) {
		b.logf("warn", []string{"pid", fmt.Sprint(pr.pid)}, "process %d signalled: not ended after %v", pr.pid, signalWait)
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

// Update resizes a pty process's terminal.
func (p *processService) Update(ctx context.Context, req *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	b, sb, err := p.f.sandboxOf(ctx)
	if err != nil {
		return nil, connectError(err)
	}
	pr, err := find(b, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if pr.pty == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has no pty", pr.pid))
	}
	if req.Msg.GetPty().GetSize() == nil {
		return connect.NewResponse(&process.UpdateResponse{}), nil
	}
	if err := resize(ctx, sb, pr.stdin, ptySize(req.Msg.GetPty().GetSize())); err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&process.UpdateResponse{}), nil
}

// stdinOf is the process a request names and its stdin.
func (p *processService) stdinOf(ctx context.Context, sel *process.ProcessSelector) (*stdinPipe, *engine.Sandbox, error) {
	b, sb, err := p.f.sandboxOf(ctx)
	if err != nil {
		return nil, nil, connectError(err)
	}
	pr, err := find(b, sel)
	if err != nil {
		return nil, nil, err
	}
	if pr.stdin == nil {
		return nil, nil, connect.NewError(connect.CodeFailedPrecondition, errNoStdin)
	}
	// As a signal (SendSignal): envd has forgotten an ended process.
	pr.mu.Lock()
	ended := pr.ended
	pr.mu.Unlock()
	if ended {
		return nil, nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process %d has ended", pr.pid))
	}
	return pr.stdin, sb, nil
}

func (p *processService) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	in, sb, err := p.stdinOf(ctx, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := in.write(ctx, sb, inputOf(req.Msg.GetInput())); err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

// StreamInput writes each data message to the stdin of the process the
// first message names.
func (p *processService) StreamInput(ctx context.Context, stream *connect.ClientStream[process.StreamInputRequest]) (*connect.Response[process.StreamInputResponse], error) {
	var in *stdinPipe
	var sb *engine.Sandbox
	for stream.Receive() {
		msg := stream.Msg()
		switch {
		case msg.GetStart() != nil:
			var err error
			if in, sb, err = p.stdinOf(ctx, msg.GetStart().GetProcess()); err != nil {
				return nil, err
			}
		case msg.GetData() != nil:
			if in == nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("input before the start message that names the process"))
			}
			if err := in.write(ctx, sb, inputOf(msg.GetData().GetInput())); err != nil {
				return nil, connectError(err)
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.StreamInputResponse{}), nil
}

func (p *processService) CloseStdin(ctx context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	in, sb, err := p.stdinOf(ctx, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := in.close(ctx, sb); err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}
