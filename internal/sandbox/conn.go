package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/sandbox/wire"
	"github.com/minisandbox/msb/internal/session"
	"golang.org/x/sys/unix"
)

// ErrClosed means the sandbox is gone (closed, or its init died).
var ErrClosed = errors.New("sandbox is closed")

// conn multiplexes requests to the supervisor over the control socket.
//
// One goroutine at a time reads the socket, and only while a response is
// awaited: a caller alone in waiting reads its own response (reading
// becomes its, until that response came), so that the wait costs no
// hand-off between goroutines; a read loop reads while others wait (a
// caller that got its own response with others still waiting starts it,
// as does a streaming exec) and ends when nobody waits any more. What an
// interrupted reader had read of the next frame stays in in for the next.
// The socket is non-blocking: a read waits in the netpoller, and a
// caller whose context ends is woken by a read deadline.
type conn struct {
	f  *os.File
	wr *wire.Writer

	mu      sync.Mutex // guards next, pending, chunks, err, reading, owner
	next    uint64
	pending map[uint64]chan wire.Response
	chunks  map[uint64]chan wire.Response // a streaming exec's output (see stream.go)
	err     error                         // set once reading failed: the connection is gone
	reading bool                          // a goroutine reads the socket
	owner   uint64                        // the request whose caller reads; 0: the read loop
	in      wire.FrameReader              // used by whoever reads
	// fds holds the descriptors read with the frames (an OpDial's
	// socket) until their response is decoded; nil: plain reads.
	fds *fdReader

	// deathNote explains an unexpected end of the connection.
	deathNote func() string

	// restored are the streaming execs a restored sandbox's supervisor
	// had in flight (adopt); orphans keeps what arrives for them until
	// their callers attach (attachExec), and, while adopt waits for its
	// answer, for any request no one waits for. nil on any other
	// connection: such responses are dropped.
	restored []wire.ExecState
	orphans  map[uint64][]wire.Response
	adopting bool // adopt has not had its answer: orphans keeps all
}

func newConn(f *os.File, deathNote func() string) *conn {
	c := &conn{f: f, wr: wire.NewWriter(f), pending: map[uint64]chan wire.Response{}, chunks: map[uint64]chan wire.Response{},
		next: 1, in: wire.FrameReader{R: f}, deathNote: deathNote}
	if fds, err := newFdReader(f); err == nil { // else DialTCP fails: no socket arrives
		c.fds, c.in.R = fds, fds
	}
	return c
}

// attach gives r the descriptor that came with it (wire.Response.Fd).
func (c *conn) attach(r *wire.Response) {
	if !r.Fd {
		return
	}
	if c.fds != nil {
		r.File = c.fds.take()
	}
	if r.File == nil && r.Error == "" {
		r.Error = "the supervisor's descriptor did not arrive on the control socket"
	}
}

// readLoop reads and dispatches responses until nobody waits for one.
func (c *conn) readLoop() {
	for {
		var r wire.Response
		if err := c.in.Next(&r); err != nil {
			c.fail(err)
			return
		}
		c.attach(&r)
		c.dispatch(r)
		c.mu.Lock()
		if len(c.pending) == 0 && len(c.chunks) == 0 {
			c.reading = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
}

// ensureReader starts the read loop if nobody reads; the caller holds mu.
func (c *conn) ensureReader() {
	if !c.reading {
		c.reading = true
		go c.readLoop()
	}
}

// release ends a caller's reading: the read loop takes over if others
// still wait. The caller holds mu.
func (c *conn) release() {
	c.owner = 0
	c.reading = false
	if len(c.pending) > 0 || len(c.chunks) > 0 {
		c.ensureReader()
	}
}

// dispatch hands a response to whoever waits for it.
func (c *conn) dispatch(r wire.Response) {
	if r.More {
		c.chunk(r)
		return
	}
	c.mu.Lock()
	ch := c.pending[r.ID]
	delete(c.pending, r.ID)
	if ch == nil {
		c.keepOrphan(r)
	}
	c.mu.Unlock()
	if ch != nil {
		ch <- r
	} else if r.File != nil { // its caller gave up
		r.File.Close()
	}
}

// fail records why the connection is gone and ends every wait.
func (c *conn) fail(err error) {
	note := ""
	if c.deathNote != nil && errors.Is(err, io.EOF) {
		note = " (" + c.deathNote() + ")"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = fmt.Errorf("%w: control connection: %v%s", ErrClosed, err, note)
	}
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
	for id, ch := range c.chunks {
		close(ch)
		delete(c.chunks, id)
	}
	if c.fds != nil {
		c.fds.closeAll()
	}
}

func (c *conn) close() {
	c.f.Close()
	if c.fds != nil {
		c.fds.closeAll()
	}
}

// call sends req and waits for its response. A response carrying an error
// becomes an *OpError. An end of ctx ends the wait; the request goes on in
// the sandbox.
func (c *conn) call(ctx context.Context, req *wire.Request) (wire.Response, error) {
	return c.do(ctx, req, false)
}

// callCancel is call for a request the supervisor can cancel (an OpExec
// or OpSessionExec):
// an end of ctx cancels it (wire.OpCancel), and callCancel returns
// ctx.Err() once the supervisor's final answer says that the command and
// what it started are dead, or after cancelWait without one (a
// supervisor that cannot answer: a frozen sandbox). So a caller told its
// command was cancelled finds nothing of it left running.
func (c *conn) callCancel(ctx context.Context, req *wire.Request) (wire.Response, error) {
	return c.do(ctx, req, true)
}

// cancelWait bounds how long a cancelled request waits for the
// supervisor to end its command: past the session's kill grace (SIGINT,
// then SIGKILL after 2 s by default) and the kill of what the command
// left, which take a few seconds at most unless the supervisor cannot run
// (a frozen sandbox).
const cancelWait = 10 * time.Second

// cancelOnEnd arranges for request id, which the supervisor can cancel
// (an OpExec, streamed or not, or an OpSessionExec), to be cancelled when
// ctx ends: it sends OpCancel, and the wait for the request's final answer
// (which comes once the command and what it started are dead) goes on
// under the returned context, which ends cancelWait later at most. The
// returned func, called with the request's result once the wait is over,
// releases it and, when ctx has ended, makes the result ctx.Err(),
// whatever the answer was.
func (c *conn) cancelOnEnd(ctx context.Context, id uint64) (context.Context, func(*wire.Response, *error)) {
	if ctx.Done() == nil {
		return ctx, func(*wire.Response, *error) {}
	}
	wait, end := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		c.wr.Write(&wire.Request{Op: wire.OpCancel, Ref: id})
		time.AfterFunc(cancelWait, end)
	})
	return wait, func(resp *wire.Response, err *error) {
		stop()
		end()
		if ctx.Err() != nil {
			*resp, *err = wire.Response{}, ctx.Err()
		}
	}
}

// do is call, or callCancel when cancel is set.
func (c *conn) do(ctx context.Context, req *wire.Request, cancel bool) (resp wire.Response, err error) {
	ch := make(chan wire.Response, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return wire.Response{}, err
	}
	if req.ID == 0 { // else wire.AdoptID
		req.ID = c.next
		c.next++
	}
	c.pending[req.ID] = ch
	self := !c.reading // nobody else waits: read the response here
	if self {
		c.reading, c.owner = true, req.ID
	}
	c.mu.Unlock()
	if err := c.wr.Write(req); err != nil {
		if self && errors.Is(err, unix.EPIPE) {
			c.fail(io.EOF) // the supervisor is gone: say why
			return wire.Response{}, c.closedErr()
		}
		c.mu.Lock()
		delete(c.pending, req.ID)
		if self {
			c.release()
		}
		c.mu.Unlock()
		return wire.Response{}, fmt.Errorf("%w: sending %s: %v", ErrClosed, req.Op, err)
	}
	if cancel {
		var done func(*wire.Response, *error)
		ctx, done = c.cancelOnEnd(ctx, req.ID)
		defer func() { done(&resp, &err) }()
	}
	var r wire.Response
	if self {
		var err error
		if r, err = c.readOwn(ctx, req.ID); err != nil {
			return wire.Response{}, err
		}
	} else {
		select {
		case resp, ok := <-ch:
			if !ok {
				return wire.Response{}, c.closedErr()
			}
			r = resp
		case <-ctx.Done():
			c.mu.Lock()
			delete(c.pending, req.ID)
			c.mu.Unlock()
			select {
			case r := <-ch: // came meanwhile: drop its socket
				if r.File != nil {
					r.File.Close()
				}
			default:
			}
			return wire.Response{}, ctx.Err()
		}
	}
	if r.Error != "" {
		if r.File != nil {
			r.File.Close()
		}
		return r, &OpError{Op: req.Op, Code: r.Code, Msg: r.Error}
	}
	return r, nil
}

// readOwn reads responses, handing on others', until the one to request
// id, as its caller; an end of ctx interrupts it (the response, when it
// comes, is read and dropped by whoever reads then).
func (c *conn) readOwn(ctx context.Context, id uint64) (wire.Response, error) {
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() {
			c.mu.Lock()
			if c.owner == id {
				c.f.SetReadDeadline(time.Unix(1, 0)) // wakes the read below
			}
			c.mu.Unlock()
		})
		defer stop()
	}
	for {
		var r wire.Response
		err := c.in.Next(&r)
		if err == nil {
			c.attach(&r)
		}
		if err == nil && (r.ID != id || r.More) {
			c.dispatch(r)
			continue
		}
		if err != nil && (!errors.Is(err, os.ErrDeadlineExceeded) || ctx.Err() == nil) {
			c.fail(err)
			return wire.Response{}, c.closedErr()
		}
		c.mu.Lock()
		delete(c.pending, id)
		if ctx.Err() != nil {
			c.f.SetReadDeadline(time.Time{}) // the deadline may be set
		}
		c.release()
		c.mu.Unlock()
		if err != nil {
			return wire.Response{}, ctx.Err()
		}
		return r, nil
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
	case wire.CodeRefused:
		return target == ErrRefused
	}
	return false
}
