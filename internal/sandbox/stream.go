package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/minisandbox/msb/internal/sandbox/wire"
	"github.com/minisandbox/msb/internal/session"
)

// ExecStream runs one command in a fresh bash like Exec and hands its
// output to emit as the supervisor reads it (stderr tells which stream,
// with SeparateStderr), then returns the result, whose output is capped as
// Exec's is. Output is relayed with back-pressure (wire.StreamWindow): while
// emit blocks, the command blocks in its writes, so no part of the path
// holds more than a few reads of output however much the command prints.
// When ctx ends, the command is interrupted as Exec's is, and ExecStream
// returns ctx.Err() once it and what it started are dead. p is reused
// after emit returns.
func (s *Sandbox) ExecStream(ctx context.Context, req session.ExecRequest, emit func(stderr bool, p []byte)) (session.Result, error) {
	return s.ExecStreamKeyed(ctx, "", req, emit)
}

// ExecStreamKeyed is ExecStream under key, the caller's name for the
// command: should the sandbox's processes be dumped while it runs, a
// sandbox restored from the dump lists it by key (RestoredExecs), and
// AttachExec goes on reading it.
func (s *Sandbox) ExecStreamKeyed(ctx context.Context, key string, req session.ExecRequest, emit func(stderr bool, p []byte)) (session.Result, error) {
	if s.conn == nil {
		return session.Result{}, ErrClosed
	}
	resp, err := s.conn.stream(ctx, &wire.Request{Op: wire.OpExec, Exec: &req, Stream: true, Key: key}, func(r wire.Response) {
		emit(r.Stream == "stderr", r.Data)
	})
	return execResultOf(resp, err)
}

func execResultOf(resp wire.Response, err error) (session.Result, error) {
	if err != nil {
		return session.Result{}, err
	}
	return resultOf(resp)
}

// resultOf is the command's result an exec's answer carries.
func resultOf(resp wire.Response) (session.Result, error) {
	if resp.Result == nil {
		return session.Result{}, errors.New("the supervisor's answer to a command carries no result")
	}
	return *resp.Result, nil
}

// RestoredExec is a streaming command (ExecStreamKeyed) that a restored
// sandbox's processes had running when they were dumped, and that runs on
// in it: Key is the name it was started under, Sent how much output its
// supervisor had sent then (stdout and stderr together). What the host
// that started it read of that output past the dump is not the restored
// command's: AttachExec sends what the restored one sends from where the
// caller says it has it.
type RestoredExec struct {
	Key  string
	Sent int64
}

// RestoredExecs are the streaming commands with a key that a sandbox made
// by Runtime.Restore had running when its processes were dumped, and that
// no AttachExec has taken yet; nil for any other sandbox.
func (s *Sandbox) RestoredExecs() []RestoredExec {
	if s.conn == nil {
		return nil
	}
	s.conn.mu.Lock()
	defer s.conn.mu.Unlock()
	var out []RestoredExec
	for _, e := range s.conn.restored {
		if e.Key != "" {
			out = append(out, RestoredExec{Key: e.Key, Sent: e.Sent})
		}
	}
	return out
}

// KeyedExecs are the keys of the streaming commands with a key
// (ExecStreamKeyed) that the supervisor has taken in and not yet ended:
// those a dump of the sandbox's processes taken now would carry
// (RestoredExecs of a sandbox restored from it). The supervisor reads
// its requests in order, so a command whose request was written before
// this one's is listed unless it has ended; one still being sent (its
// ExecStreamKeyed not yet writing) is not.
func (s *Sandbox) KeyedExecs(ctx context.Context) ([]string, error) {
	if s.conn == nil {
		return nil, ErrClosed
	}
	resp, err := s.conn.call(ctx, &wire.Request{Op: wire.OpExecs})
	if err != nil {
		return nil, err
	}
	if resp.Execs == nil {
		return nil, errors.New("the supervisor did not list its commands")
	}
	var keys []string
	for _, e := range resp.Execs.Streams {
		if e.Key != "" {
			keys = append(keys, e.Key)
		}
	}
	return keys, nil
}

// AttachExec goes on reading the restored command key (RestoredExecs) as
// ExecStreamKeyed would have: its output from offset from on (the caller
// has the output before it, from the host that started it; at most the
// command's Sent) is handed to emit, then its result is returned. An end
// of ctx interrupts the command as ExecStream's does. A key that is not
// restored (or already attached) is ErrNotFound.
func (s *Sandbox) AttachExec(ctx context.Context, key string, from int64, emit func(stderr bool, p []byte)) (session.Result, error) {
	if s.conn == nil {
		return session.Result{}, ErrClosed
	}
	resp, err := s.conn.attachExec(ctx, key, from, func(r wire.Response) {
		emit(r.Stream == "stderr", r.Data)
	})
	return execResultOf(resp, err)
}

// adoptExecs learns the streaming commands a restored sandbox's
// supervisor has running (conn.adopt): called once, on a sandbox made by
// Runtime.Restore, before any other request. A supervisor that cannot
// say (one dumped by an msb before wire.OpExecs) has none to attach; the
// sandbox works otherwise.
func (s *Sandbox) adoptExecs(ctx context.Context) {
	if err := s.conn.adopt(ctx); err != nil {
		s.log.Warn("the restored sandbox's running commands cannot be attached", "err", err)
	}
}

// adopt asks a restored supervisor for its streaming execs in flight
// (wire.OpExecs) as the connection's first request, and numbers the
// requests after it above every request ID of the dumped sandbox's
// connection, whose answers the restored execs still send: what arrives
// for those execs is kept until attachExec takes it (keepOrphan). A
// supervisor without OpExecs leaves nothing to attach, and the requests
// are numbered far above any earlier connection's. The supervisor may be
// an older msb's: the requests are JSON unless its answer says it reads
// binary frames.
func (c *conn) adopt(ctx context.Context) error {
	c.mu.Lock()
	c.orphans, c.adopting = map[uint64][]wire.Response{}, true
	c.mu.Unlock()
	c.wr.SetBinary(false)
	resp, err := c.call(ctx, &wire.Request{ID: wire.AdoptID, Op: wire.OpExecs})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.adopting = false
	if err != nil || resp.Execs == nil {
		c.orphans, c.next = nil, max(c.next, 1<<40)
		if err == nil {
			err = errors.New("the supervisor did not list its commands")
		}
		return fmt.Errorf("listing the restored supervisor's commands: %w", err)
	}
	c.next = max(c.next, resp.Execs.Last+1)
	c.restored = resp.Execs.Streams
	c.wr.SetBinary(resp.Execs.Binary)
	keep := map[uint64]bool{}
	for _, e := range c.restored {
		keep[e.ID] = true
	}
	for id := range c.orphans {
		if !keep[id] {
			delete(c.orphans, id)
		}
	}
	return nil
}

// keepOrphan keeps r, a response no one waits for, for a restored exec's
// attachExec (see adopt); the caller holds c.mu. A restored exec has at most
// wire.StreamWindow chunks unacknowledged, which it sends again on
// attach: more than twice that many are dropped.
func (c *conn) keepOrphan(r wire.Response) {
	if c.orphans == nil {
		return
	}
	if !c.adopting && !slices.ContainsFunc(c.restored, func(e wire.ExecState) bool { return e.ID == r.ID }) {
		return
	}
	if r.More && len(c.orphans[r.ID]) >= 2*wire.StreamWindow {
		return
	}
	c.orphans[r.ID] = append(c.orphans[r.ID], r)
}

// attachExec is stream for the restored exec key: it takes the responses kept
// for it, has the supervisor send again what no acknowledgement reached
// (wire.OpAttach), and hands emit its output from offset from on, each
// byte once, until its final response, which may come before chunks sent
// again: the wait goes on until the output reaches the length the final
// response says.
func (c *conn) attachExec(ctx context.Context, key string, from int64, emit func(wire.Response)) (resp wire.Response, err error) {
	final := make(chan wire.Response, 1)
	chunks := make(chan wire.Response, 4*wire.StreamWindow)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return wire.Response{}, err
	}
	i := slices.IndexFunc(c.restored, func(e wire.ExecState) bool { return e.Key == key && key != "" })
	if i < 0 {
		c.mu.Unlock()
		return wire.Response{}, fmt.Errorf("%w: no restored command %q", ErrNotFound, key)
	}
	id := c.restored[i].ID
	c.restored = slices.Delete(c.restored, i, i+1)
	for _, r := range c.orphans[id] {
		if r.More {
			chunks <- r
		} else {
			final <- r
		}
	}
	delete(c.orphans, id)
	c.pending[id] = final
	c.chunks[id] = chunks
	c.ensureReader()
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		delete(c.chunks, id)
		c.mu.Unlock()
	}()
	if err := c.wr.Write(&wire.Request{Op: wire.OpAttach, Ref: id}); err != nil {
		return wire.Response{}, fmt.Errorf("%w: sending %s: %v", ErrClosed, wire.OpAttach, err)
	}
	ctx, done := c.cancelOnEnd(ctx, id)
	defer func() { done(&resp, &err) }()
	next := from
	take := func(r wire.Response) error {
		end := r.Off + int64(len(r.Data))
		if end > next {
			if r.Off < next {
				r.Data = r.Data[next-r.Off:]
			}
			emit(r)
			next = end
		}
		if err := c.wr.Write(&wire.Request{Op: wire.OpStreamAck, Ref: id, Off: next}); err != nil {
			return fmt.Errorf("%w: acknowledging output: %v", ErrClosed, err)
		}
		return nil
	}
	var last *wire.Response
	for {
		if last != nil && next >= last.Off {
			if last.Error != "" {
				return *last, &OpError{Op: wire.OpExec, Code: last.Code, Msg: last.Error}
			}
			return *last, nil
		}
		select {
		case r, ok := <-chunks:
			if !ok {
				return wire.Response{}, c.closedErr()
			}
			if err := take(r); err != nil {
				return wire.Response{}, err
			}
		case r, ok := <-final:
			if !ok {
				return wire.Response{}, c.closedErr()
			}
			for len(chunks) > 0 {
				if err := take(<-chunks); err != nil {
					return wire.Response{}, err
				}
			}
			last = &r
		case <-ctx.Done():
			return wire.Response{}, ctx.Err()
		}
	}
}

// stream sends a streaming req and hands each chunk of output to emit,
// acknowledging it once emit returns, until the final response.
func (c *conn) stream(ctx context.Context, req *wire.Request, emit func(wire.Response)) (resp wire.Response, err error) {
	final := make(chan wire.Response, 1)
	chunks := make(chan wire.Response, wire.StreamWindow)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return wire.Response{}, err
	}
	req.ID = c.next
	c.next++
	c.pending[req.ID] = final
	c.chunks[req.ID] = chunks
	c.ensureReader() // the caller consumes chunks as the read loop hands them on
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, req.ID)
		delete(c.chunks, req.ID)
		c.mu.Unlock()
	}()
	if err := c.wr.Write(req); err != nil {
		return wire.Response{}, fmt.Errorf("%w: sending %s: %v", ErrClosed, req.Op, err)
	}
	ctx, done := c.cancelOnEnd(ctx, req.ID)
	defer func() { done(&resp, &err) }()
	for {
		select {
		case r, ok := <-chunks:
			if !ok {
				return wire.Response{}, c.closedErr()
			}
			emit(r)
			if err := c.wr.Write(&wire.Request{Op: wire.OpStreamAck, Ref: req.ID, Off: r.Off + int64(len(r.Data))}); err != nil {
				return wire.Response{}, fmt.Errorf("%w: acknowledging output: %v", ErrClosed, err)
			}
		case r, ok := <-final:
			if !ok {
				return wire.Response{}, c.closedErr()
			}
			// One goroutine at a time reads the socket, so every
			// chunk sent before the final response is already queued.
			for len(chunks) > 0 {
				emit(<-chunks)
			}
			if r.Error != "" {
				return r, &OpError{Op: req.Op, Code: r.Code, Msg: r.Error}
			}
			return r, nil
		case <-ctx.Done(): // cancelled, and no final answer in cancelWait
			return wire.Response{}, ctx.Err()
		}
	}
}

// chunk queues a streaming response's output for its caller. The
// supervisor sends at most wire.StreamWindow unacknowledged, which the
// queue holds; one past that breaks the protocol and is dropped rather than
// stalling every other request of the sandbox.
func (c *conn) chunk(r wire.Response) {
	c.mu.Lock()
	ch := c.chunks[r.ID]
	if ch == nil {
		c.keepOrphan(r)
	}
	c.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- r:
	default:
	}
}

func (c *conn) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
