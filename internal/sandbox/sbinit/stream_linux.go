package sbinit

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/minisandbox/msb/internal/sandbox/wire"
)

// A flow is one exec's relay of output to the host when it streams (see
// wire.OpStreamAck): the chunks sent and not yet acknowledged, kept so
// that a restored sandbox's new host can have them again (wire.OpAttach);
// and, for every exec, how to end it when the host cancels it
// (wire.OpCancel).
type flow struct {
	inflight chan struct{} // one token per unacknowledged chunk
	cancel   context.CancelFunc
	key      string // the host's name for a streaming exec (wire.Request.Key)
	stream   bool

	wmu sync.Mutex // held while chunks are written: sends and resends keep their order
	mu  sync.Mutex // guards the fields below
	// sent is the output sent; acked the output acknowledged, below
	// which nothing is kept. unacked are the chunks between them.
	sent, acked int64
	unacked     []chunk
	// acks is closed (and replaced) by each acknowledgement that drops
	// chunks (drained waits on it).
	acks chan struct{}
}

// chunk is a read of output sent and kept until acknowledged.
type chunk struct {
	off    int64
	stream string
	data   []byte
}

// flows are the execs in flight, by request ID.
type flows struct {
	mu sync.Mutex // guards m
	m  map[uint64]*flow
}

// open registers request req, before any of its acknowledgements or its
// cancel can be read, and returns the context the exec runs under.
func (fs *flows) open(ctx context.Context, req *wire.Request) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	f := &flow{inflight: make(chan struct{}, wire.StreamWindow), cancel: cancel, key: req.Key, stream: req.Stream,
		acks: make(chan struct{})}
	fs.mu.Lock()
	if fs.m == nil {
		fs.m = map[uint64]*flow{}
	}
	fs.m[req.ID] = f
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

// signal applies an OpStreamAck, OpCancel or OpAttach (whose resend
// writes to out).
func (fs *flows) signal(req *wire.Request, out *wire.Writer) {
	fs.mu.Lock()
	f := fs.m[req.Ref]
	fs.mu.Unlock()
	if f == nil {
		return
	}
	switch req.Op {
	case wire.OpCancel:
		f.cancel()
	case wire.OpAttach:
		go f.resend(out, req.Ref)
	default:
		f.ack(req.Off)
	}
}

// list is the streaming execs in flight, by request ID.
func (fs *flows) list() []wire.ExecState {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []wire.ExecState
	for id, f := range fs.m {
		if !f.stream {
			continue
		}
		f.mu.Lock()
		out = append(out, wire.ExecState{ID: id, Key: f.key, Acked: f.acked, Sent: f.sent})
		f.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b wire.ExecState) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// ack drops the chunks an acknowledgement up to off reaches past (one
// chunk when off is 0, an acknowledgement without offset) and frees their
// places in the window.
func (f *flow) ack(off int64) {
	f.mu.Lock()
	n := 0
	for n < len(f.unacked) && (off == 0 && n == 0 || off > 0 && f.unacked[n].off+int64(len(f.unacked[n].data)) <= off) {
		n++
	}
	if n > 0 {
		last := f.unacked[n-1]
		f.acked = last.off + int64(len(last.data))
		f.unacked = slices.Delete(f.unacked, 0, n)
		close(f.acks)
		f.acks = make(chan struct{})
	}
	f.mu.Unlock()
	for range n {
		select {
		case <-f.inflight:
		default:
		}
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
	f.wmu.Lock()
	defer f.wmu.Unlock()
	f.mu.Lock()
	off := f.sent
	f.unacked = append(f.unacked, chunk{off: off, stream: name, data: bytes.Clone(p)})
	f.sent += int64(len(p))
	f.mu.Unlock()
	out.Write(wire.Response{ID: id, More: true, Stream: name, Data: p, Off: off})
}

// resend sends again, in order, the chunks no acknowledgement reached
// (wire.OpAttach).
func (f *flow) resend(out *wire.Writer, id uint64) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	f.mu.Lock()
	again := slices.Clone(f.unacked)
	f.mu.Unlock()
	for _, c := range again {
		out.Write(wire.Response{ID: id, More: true, Stream: c.stream, Data: c.data, Off: c.off})
	}
}

// drained returns once every chunk sent is acknowledged, or ctx ended
// (the exec was cancelled, or the connection ended). An exec's final
// Response waits for it: its flow, closed with it, is what keeps the
// chunks no acknowledgement reached, which a restored sandbox's host has
// sent again (wire.OpAttach) and cannot have once the flow is gone.
func (f *flow) drained(ctx context.Context) {
	for {
		f.mu.Lock()
		if len(f.unacked) == 0 {
			f.mu.Unlock()
			return
		}
		acks := f.acks
		f.mu.Unlock()
		select {
		case <-acks:
		case <-ctx.Done():
			return
		}
	}
}

// total is the output sent, which a streamed exec's final Response says.
func (f *flow) total() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent
}
