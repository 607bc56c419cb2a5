package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// A sandbox never holds the caller's files as its stdio: a host file handed
// to it could be reopened through /proc/self/fd/N (read, truncated, or, for
// a directory, walked), a terminal could be driven. Instead its init gets
// pipes, and msb copies between them and the caller's Stdio: a relay.

// relays are the copying ends of a sandbox's stdio pipes.
type relays struct {
	in   *os.File // host end of stdin, written from Stdio.In
	outs []*outRelay
}

// setupStdio gives cmd (the sandbox's init) pipes for the streams Stdio
// names and starts copying; tail also receives what init writes to stderr.
func setupStdio(std *Stdio, tail io.Writer) (stdin, stdout, stderr *os.File, r *relays, err error) {
	r = &relays{}
	var child []*os.File
	defer func() {
		if err != nil {
			for _, f := range child {
				f.Close()
			}
			r.close()
		}
	}()
	if std.In != nil {
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("stdin pipe: %w", err)
		}
		child, r.in, stdin = append(child, pr), pw, pr
		go func() {
			io.Copy(pw, std.In)
			pw.Close()
		}()
	}
	for i, w := range []io.Writer{std.Out, std.Err} {
		if i == 1 {
			w = teeWriter{w, tail}
		} else if w == nil {
			continue
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("output pipe: %w", err)
		}
		child = append(child, pw)
		o := newOutRelay(pr, w)
		r.outs = append(r.outs, o)
		go o.loop()
		if i == 0 {
			stdout = pw
		} else {
			stderr = pw
		}
	}
	return stdin, stdout, stderr, r, nil
}

// teeWriter writes to w (which may be nil) and, whatever w does, to tail.
type teeWriter struct{ w, tail io.Writer }

func (t teeWriter) Write(p []byte) (int, error) {
	t.tail.Write(p)
	if t.w != nil {
		t.w.Write(p) // a caller that stopped reading does not stall the sandbox
	}
	return len(p), nil
}

// sync returns once everything the sandbox wrote to its stdout and stderr
// before the call has been copied to the caller's writers, or ctx ends.
func (r *relays) sync(ctx context.Context) error {
	if r == nil {
		return nil
	}
	for _, o := range r.outs {
		done := make(chan struct{})
		go func() { o.sync(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// close stops feeding stdin; the output relays end by themselves once the
// sandbox's processes are gone (end of file).
func (r *relays) close() {
	if r != nil && r.in != nil {
		r.in.Close()
	}
}

// wait returns once the output relays have copied everything (the sandbox
// has ended, so its ends are closed).
func (r *relays) wait() {
	if r == nil {
		return
	}
	for _, o := range r.outs {
		<-o.done
	}
}

// outRelay copies one pipe to a writer and can tell when it has caught up.
type outRelay struct {
	r    *os.File
	dst  io.Writer
	done chan struct{}

	mu   sync.Mutex // guards busy and eof; cond waits on them
	cond *sync.Cond
	busy bool // bytes taken from the pipe are not yet written
	eof  bool
}

func newOutRelay(r *os.File, dst io.Writer) *outRelay {
	o := &outRelay{r: r, dst: dst, done: make(chan struct{})}
	o.cond = sync.NewCond(&o.mu)
	return o
}

func (o *outRelay) loop() {
	defer close(o.done)
	defer o.r.Close()
	rc, err := o.r.SyscallConn()
	if err != nil {
		o.finish()
		return
	}
	buf := make([]byte, 32<<10)
	for {
		var n int
		var rerr error
		// The read and the busy mark happen under mu, so that sync never
		// sees an empty pipe while bytes are on their way.
		err := rc.Read(func(fd uintptr) bool {
			o.mu.Lock()
			defer o.mu.Unlock()
			n, rerr = unix.Read(int(fd), buf)
			o.busy = n > 0
			return rerr != unix.EAGAIN
		})
		if n > 0 {
			o.dst.Write(buf[:n])
			o.mu.Lock()
			o.busy = false
			o.cond.Broadcast()
			o.mu.Unlock()
			continue
		}
		if err != nil || rerr != unix.EINTR {
			break // end of file, or an error nothing can be done about
		}
	}
	o.finish()
}

func (o *outRelay) finish() {
	o.mu.Lock()
	o.eof = true
	o.cond.Broadcast()
	o.mu.Unlock()
}

func (o *outRelay) sync() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for !o.eof && (o.busy || pending(o.r) > 0) {
		o.cond.Wait()
	}
}

func pending(f *os.File) int {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }) // FIONREAD
	return n
}
