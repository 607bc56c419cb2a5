package e2b

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process/processconnect"
)

// keepAlive is how often a quiet process's stream carries a keepalive.
const keepAlive = 30 * time.Second

// proc is a process started through Start; it lives as long as the
// Start stream that runs it.
type proc struct {
	pid    uint32
	tag    string
	config *process.ProcessConfig
	cancel context.CancelFunc
}

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

func (p *processService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	b, sb, err := p.f.sandboxOf(ctx)
	if err != nil {
		return connectError(err)
	}
	cfg := req.Msg.GetProcess()
	if cfg.GetCmd() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is empty"))
	}
	if req.Msg.Pty != nil {
		return connect.NewError(connect.CodeUnimplemented, errors.New("msb does not serve PTYs yet (docs/e2b.md)"))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr := &proc{tag: req.Msg.GetTag(), config: cfg, cancel: cancel}
	b.mu.Lock()
	b.next++
	pr.pid = b.next
	b.procs[pr.pid] = pr
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.procs, pr.pid)
		b.mu.Unlock()
	}()

	var mu sync.Mutex // one Send at a time: the command's output and keepalives
	send := func(ev *process.ProcessEvent) error {
		mu.Lock()
		defer mu.Unlock()
		return stream.Send(&process.StartResponse{Event: ev})
	}
	if err := send(&process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: pr.pid}}}); err != nil {
		return err
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				send(&process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}})
			}
		}
	}()

	xr := api.ExecRequest{Command: commandOf(cfg), Cwd: cfg.GetCwd(), SeparateStderr: true}
	for k, v := range cfg.GetEnvs() {
		xr.Env = append(xr.Env, k+"="+v)
	}
	res, err := sb.ExecStream(ctx, xr, func(ev api.ExecEvent) {
		data := &process.ProcessEvent_DataEvent{}
		switch ev.Type {
		case api.EventStdout:
			data.Output = &process.ProcessEvent_DataEvent_Stdout{Stdout: []byte(ev.Data)}
		case api.EventStderr:
			data.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: []byte(ev.Data)}
		default:
			return
		}
		send(&process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: data}})
	})
	if err != nil {
		if ctx.Err() != nil { // killed by SendSignal, or the client left
			return send(endEvent(-1, "signal: killed", ""))
		}
		return connectError(err)
	}
	return send(endEvent(int32(res.ExitCode), fmt.Sprintf("exit status %d", res.ExitCode), ""))
}

func endEvent(code int32, status, msg string) *process.ProcessEvent {
	end := &process.ProcessEvent_EndEvent{ExitCode: code, Exited: true, Status: status}
	if msg != "" {
		end.Error = &msg
	}
	return &process.ProcessEvent{Event: &process.ProcessEvent_End{End: end}}
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
	pr.cancel() // the engine stops the command: SIGINT, then SIGKILL
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

func unimplemented(what string) error {
	return connect.NewError(connect.CodeUnimplemented, fmt.Errorf("msb does not serve %s yet (docs/e2b.md)", what))
}

func (p *processService) Connect(context.Context, *connect.Request[process.ConnectRequest], *connect.ServerStream[process.ConnectResponse]) error {
	return unimplemented("process.Process/Connect")
}

func (p *processService) Update(context.Context, *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	return nil, unimplemented("process.Process/Update (PTY)")
}

func (p *processService) StreamInput(context.Context, *connect.ClientStream[process.StreamInputRequest]) (*connect.Response[process.StreamInputResponse], error) {
	return nil, unimplemented("process.Process/StreamInput")
}

func (p *processService) SendInput(context.Context, *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	return nil, unimplemented("process.Process/SendInput")
}

func (p *processService) CloseStdin(context.Context, *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	return nil, unimplemented("process.Process/CloseStdin")
}
