package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minisandbox/msb/internal/api"
)

// A connection's life, as the server bounds it:
//
//   - headers: a request's headers must arrive within HeaderTimeout;
//   - body: a request body must keep coming: each read of it may wait at
//     most BodyIdleTimeout for bytes (a slow upload that makes progress
//     is fine; one that stops fails with 408);
//   - count: at most MaxConns connections are open at once per listener
//     (further ones wait in the kernel's backlog until one closes);
//   - shutdown: reads that wait for a client (headers, or a body the
//     handler is reading) are ended at once; requests that are running
//     get ShutdownGrace.

// connKey holds a request's *connState in its context.
const connKey ctxKey = 100

// connState is what the server knows of one open connection.
type connState struct {
	c net.Conn
	// inHandler: a request of the connection is being served.
	inHandler atomic.Bool
	// readingBody: its handler waits on the request body.
	readingBody atomic.Bool
}

// conns are a server's open connections.
type conns struct {
	mu  sync.Mutex // guards all
	all map[net.Conn]*connState
}

func newConns() *conns { return &conns{all: map[net.Conn]*connState{}} }

// context is the http.Server's ConnContext: it registers c.
func (cs *conns) context(ctx context.Context, c net.Conn) context.Context {
	st := &connState{c: c}
	cs.mu.Lock()
	cs.all[c] = st
	cs.mu.Unlock()
	return context.WithValue(ctx, connKey, st)
}

// state is the http.Server's ConnState hook: it forgets closed
// connections.
func (cs *conns) state(c net.Conn, s http.ConnState) {
	if s == http.StateClosed || s == http.StateHijacked {
		cs.mu.Lock()
		delete(cs.all, c)
		cs.mu.Unlock()
	}
}

// endStalledReads ends every read that waits for a client: connections
// with no request being served (reading headers, or idle), and handlers
// waiting on a body. Running requests are left to finish.
func (cs *conns) endStalledReads() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	n := 0
	for _, st := range cs.all {
		if !st.inHandler.Load() || st.readingBody.Load() {
			st.c.SetReadDeadline(time.Now())
			n++
		}
	}
	return n
}

// guardBody marks the request's connection as served while next runs,
// and gives each read of a request body a deadline of idle.
func guardBody(next http.Handler, idle time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st, _ := r.Context().Value(connKey).(*connState)
		if st != nil {
			st.inHandler.Store(true)
			defer st.inHandler.Store(false)
		}
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			// Also bounds the server's discarding of a body the handler left.
			rc.SetReadDeadline(time.Now().Add(idle))
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, idle: idle, st: st}
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody is a request body whose every read has a deadline.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
	st   *connState
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	b.rc.SetReadDeadline(time.Now().Add(b.idle))
	if b.st != nil {
		b.st.readingBody.Store(true)
		defer b.st.readingBody.Store(false)
	}
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		// Whole: the server's watch for the client going away must not
		// time out while a long answer streams.
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// errBodyStalled: the client announced a body and stopped sending it.
var errBodyStalled = errors.New("the request body stopped arriving")

// readBody reads a whole request body. A body cut short is a 400 and one
// that stalls a 408, both saying so; a body over the cap stays a
// *http.MaxBytesError (413).
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if err == nil {
		return b, nil
	}
	return nil, bodyError(err, len(b))
}

func bodyError(err error, got int) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.Is(err, os.ErrDeadlineExceeded):
		return errorf(http.StatusRequestTimeout, api.CodeBadRequest, "reading the body: %v after %d bytes: %v", errBodyStalled, got, err)
	}
	return badRequest("reading the body: cut short after %d bytes: %v", got, err)
}

// limitListener accepts at most n connections open at once.
type limitListener struct {
	net.Listener
	sem    chan struct{}
	closed chan struct{}
	close  func()
}

func limitConns(l net.Listener, n int) net.Listener {
	ll := &limitListener{Listener: l, sem: make(chan struct{}, n), closed: make(chan struct{})}
	ll.close = sync.OnceFunc(func() { close(ll.closed) })
	return ll
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{Conn: c, release: sync.OnceFunc(func() { <-l.sem })}, nil
}

func (l *limitListener) Close() error {
	l.close()
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// isUnix says whether c came from a unix socket listener.
func isUnix(c net.Conn) bool {
	if lc, ok := c.(*limitedConn); ok {
		c = lc.Conn
	}
	_, ok := c.(*net.UnixConn)
	return ok
}
