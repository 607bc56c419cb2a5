package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/minisandbox/msb/internal/sandbox/wire"
	"github.com/minisandbox/msb/internal/session"
)

// ErrClosed means the sandbox is gone (closed, or its init died).
var ErrClosed = errors.New("sandbox is closed")

// conn multiplexes requests to the supervisor over the control socket.
type conn struct {
	f  *os.File
	wr *wire.Writer

	mu      sync.Mutex // guards next, pending, chunks, err
	next    uint64
	pending map[uint64]chan wire.Response
	chunks  map[uint64]chan wire.Response // a streaming exec's output (see stream.go)
	err     error                         // set once the read loop ends

	// deathNote explains an unexpected end of the connection.
	deathNote func() string
}

func newConn(f *os.File, deathNote func() string) *conn {
	c := &conn{f: f, wr: wire.NewWriter(f), pending: map[uint64]chan wire.Response{}, chunks: map[uint64]chan wire.Response{}, next: 1, deathNote: deathNote}
	go c.readLoop()
	return c
}

func (c *conn) readLoop() {
	var err error
	for {
		var r wire.Response
		if err = wire.ReadFrame(c.f, &r); err != nil {
			break
		}
		if r.More {
			c.chunk(r)
			continue
		}
		c.mu.Lock()
		ch := c.pending[r.ID]
		delete(c.pending, r.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
	note := ""
	if c.deathNote != nil && errors.Is(err, io.EOF) {
		note = " (" + c.deathNote() + ")"
	}
	c.mu.Lock()
	c.err = fmt.Errorf("%w: control connection: %v%s", ErrClosed, err, note)
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
	for id, ch := range c.chunks {
		close(ch)
		delete(c.chunks, id)
	}
	c.mu.Unlock()
}

func (c *conn) close() { c.f.Close() }

// call sends req and waits for its response. A response carrying an error
// becomes an *OpError.
func (c *conn) call(ctx context.Context, req *wire.Request) (wire.Response, error) {
	ch := make(chan wire.Response, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return wire.Response{}, err
	}
	req.ID = c.next
	c.next++
	c.pending[req.ID] = ch
	c.mu.Unlock()
	if err := c.wr.Write(req); err != nil {
		c.mu.Lock()
		delete(c.pending, req.ID)
		c.mu.Unlock()
		return wire.Response{}, fmt.Errorf("%w: sending %s: %v", ErrClosed, req.Op, err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			c.mu.Lock()
			err := c.err
			c.mu.Unlock()
			return wire.Response{}, err
		}
		if r.Error != "" {
			return r, &OpError{Op: req.Op, Code: r.Code, Msg: r.Error}
		}
		return r, nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, req.ID)
		c.mu.Unlock()
		return wire.Response{}, ctx.Err()
	}
}

// OpError is an error the sandbox reported for one operation.
type OpError struct {
	Op   string
	Code string
	Msg  string
}

func (e *OpError) Error() string { return e.Op + ": " + e.Msg }

// Sentinel errors an OpError matches with errors.Is.
var (
	ErrNotFound     = errors.New("not found")
	ErrExists       = errors.New("already exists")
	ErrSessionEnded = session.ErrSessionEnded // one error for a session's end, on both sides
	ErrEscape       = errors.New("path escapes the sandbox")
	ErrTooLarge     = errors.New("too large")
	ErrInvalid      = errors.New("invalid request")
)

// Is maps wire codes to the sentinel errors.
func (e *OpError) Is(target error) bool {
	switch e.Code {
	case wire.CodeNotFound:
		return target == ErrNotFound
	case wire.CodeExists:
		return target == ErrExists
	case wire.CodeSessionEnded:
		return target == ErrSessionEnded
	case wire.CodeEscape:
		return target == ErrEscape
	case wire.CodeTooLarge:
		return target == ErrTooLarge
	case wire.CodeInvalid:
		return target == ErrInvalid
	}
	return false
}
