package sandbox

import (
	"context"
	"encoding/json"
	"fmt"

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
	if s.conn == nil {
		return session.Result{}, ErrClosed
	}
	b, err := json.Marshal(req)
	if err != nil {
		return session.Result{}, err
	}
	resp, err := s.conn.stream(ctx, &wire.Request{Op: wire.OpExec, Exec: b, Stream: true}, func(r wire.Response) {
		emit(r.Stream == "stderr", r.Data)
	})
	if err != nil {
		return session.Result{}, err
	}
	var res session.Result
	if err := json.Unmarshal(resp.Result, &res); err != nil {
		return session.Result{}, fmt.Errorf("decoding exec result: %w", err)
	}
	return res, nil
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
			if err := c.wr.Write(&wire.Request{Op: wire.OpStreamAck, Ref: req.ID}); err != nil {
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
