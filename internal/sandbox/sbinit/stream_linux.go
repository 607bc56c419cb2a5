package sbinit

import (
	"context"
	"sync"

	"github.com/minisandbox/msb/internal/sandbox/wire"
)

// A flow is one exec's relay of output to the host when it streams (see
// wire.OpStreamAck): the chunks sent and not yet acknowledged; and, for
// every exec, how to end it when the host cancels it (wire.OpCancel).
type flow struct {
	inflight chan struct{} // one token per unacknowledged chunk
	cancel   context.CancelFunc
}

// flows are the execs in flight, by request ID.
type flows struct {
	mu sync.Mutex // guards m
	m  map[uint64]*flow
}

// open registers request id, before any of its acknowledgements or its
// cancel can be read, and returns the context the exec runs under.
func (fs *flows) open(ctx context.Context, id uint64) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	f := &flow{inflight: make(chan struct{}, wire.StreamWindow), cancel: cancel}
	fs.mu.Lock()
	if fs.m == nil {
		fs.m = map[uint64]*flow{}
	}
	fs.m[id] = f
	fs.mu.Unlock()
	return ctx
}

// get is request id's flow (nil once closed).
func (fs *flows) get(id uint64) *flow {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.m[id]
}

func (fs *flows) close(id uint64) {
	fs.mu.Lock()
	f := fs.m[id]
	delete(fs.m, id)
	fs.mu.Unlock()
	if f != nil {
		f.cancel()
	}
}

// signal applies an OpStreamAck or OpCancel.
func (fs *flows) signal(req *wire.Request) {
	fs.mu.Lock()
	f := fs.m[req.Ref]
	fs.mu.Unlock()
	if f == nil {
		return
	}
	if req.Op == wire.OpCancel {
		f.cancel()
		return
	}
	select {
	case <-f.inflight:
	default:
	}
}

// send relays one read of output, first waiting, while the window is full,
// for the host to acknowledge an earlier one; once ctx ends it drops it.
func (f *flow) send(ctx context.Context, out *wire.Writer, id uint64, stderr bool, p []byte) {
	select {
	case f.inflight <- struct{}{}:
	case <-ctx.Done():
		return
	}
	name := "stdout"
	if stderr {
		name = "stderr"
	}
	out.Write(wire.Response{ID: id, More: true, Stream: name, Data: p})
}
