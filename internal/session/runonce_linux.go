package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// RunOnce runs one command in a fresh non-interactive `bash -c` and returns
// its result, with the same output handling, timeout and error semantics as
// Exec. The command's stdin never receives data. When the shell exits, or
// on timeout, everything the command started is killed, background jobs
// included (see killTree); Result.SessionEnded is always false. If some of
// those processes were still alive after their SIGKILL, the result comes
// with an error wrapping ErrSurvivors that names them.
func RunOnce(ctx context.Context, opts Options, req ExecRequest) (Result, error) {
	if strings.IndexByte(req.Command, 0) >= 0 {
		return Result{}, fmt.Errorf("run once: command contains a NUL byte: %w", ErrInvalidCommand)
	}
	opts = opts.withDefaults()
	opts.Gate.Enter()
	defer opts.Gate.Leave()
	max := req.MaxOutput
	if max <= 0 {
		max = opts.MaxOutput
	}
	marker := newNonce()

	var files []*os.File // the child's ends, closed once it started
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	childEnd := func(fd int, name string) *os.File {
		f := os.NewFile(uintptr(fd), name)
		files = append(files, f)
		return f
	}
	stdinR, stdinW, err := pipeFor(false)
	if err != nil {
		return Result{}, fmt.Errorf("run once: creating stdin pipe: %w", err)
	}
	defer closeFD(&stdinW)
	n := 1
	if req.SeparateStderr {
		n = 2
	}
	var streams []*stream
	defer func() {
		for _, st := range streams {
			st.close()
		}
	}()
	for i := 0; i < n; i++ {
		st, err := newStream(max)
		if err != nil {
			return Result{}, fmt.Errorf("run once: %w", err)
		}
		if req.OnOutput != nil {
			stderr := i == 1
			st.sink = func(p []byte) { req.OnOutput(stderr, p) }
		}
		streams = append(streams, st)
	}
	wake, err := newWakePipe()
	if err != nil {
		return Result{}, fmt.Errorf("run once: creating wake pipe: %w", err)
	}
	defer wake.close()

	cmd := exec.Command(opts.Shell, "--noprofile", "--norc", "-c", req.Command)
	cmd.Args[0] = filepath.Base(opts.Shell) // "bash: ..." in messages
	cmd.Env = shellEnv(opts.Env, marker)
	cmd.Dir = opts.Dir
	cmd.Stdin = childEnd(stdinR, "stdin")
	cmd.Stdout = childEnd(streams[0].w, "stdout")
	cmd.Stderr = cmd.Stdout
	streams[0].w = -1
	if n == 2 {
		cmd.Stderr = childEnd(streams[1].w, "stderr")
		streams[1].w = -1
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	shell, err := startShell(cmd, opts.Start)
	if err != nil {
		return Result{}, fmt.Errorf("run once: running %s: %w", opts.Shell, err)
	}
	defer shell.closeFDs()
	for _, f := range files {
		f.Close()
	}
	files = nil

	stop := context.AfterFunc(ctx, wake.wake)
	defer stop()
	start := time.Now()
	var deadline, abortAt time.Time
	if req.Timeout > 0 {
		deadline = start.Add(req.Timeout)
	}
	var ctxErr error
	aborting, killed := false, false
	scratch := make([]byte, 64<<10)
	fds := make([]unix.PollFd, 0, 4)
	var waits pollSet
	defer waits.close()
	for {
		fds = append(fds[:0],
			unix.PollFd{Fd: int32(shell.exitFD), Events: unix.POLLIN},
			unix.PollFd{Fd: int32(wake.r), Events: unix.POLLIN})
		for _, st := range streams {
			if !st.eof {
				fds = append(fds, unix.PollFd{Fd: int32(st.r), Events: unix.POLLIN})
			}
		}
		next := deadline
		if aborting {
			next = abortAt.Add(opts.KillGrace)
			if killed {
				next = time.Time{}
			}
		}
		if err := waits.wait(opts.Gate, fds, next); err != nil {
			kerr := killTree(shell, marker)
			shell.wait()
			return Result{}, errors.Join(fmt.Errorf("run once: poll: %w", err), kerr)
		}
		for _, st := range streams {
			st.readAvailable(scratch)
		}
		if readable(fds[0]) {
			break
		}
		if readable(fds[1]) {
			wake.drain()
		}
		now := time.Now()
		switch {
		case !aborting && (ctx.Err() != nil || (!deadline.IsZero() && !now.Before(deadline))):
			// A non-interactive bash dies of SIGINT itself, which is what
			// we want here; the group signal reaches the foreground job.
			aborting, abortAt, ctxErr = true, now, ctx.Err()
			_ = unix.Kill(-shell.pid, unix.SIGINT)
			signal(descendants(childLister(), []int{shell.pid}), unix.SIGINT)
		case aborting && !killed && !now.Before(abortAt.Add(opts.KillGrace)):
			killed = true
			signal(descendants(childLister(), []int{shell.pid}), unix.SIGKILL)
			_ = unix.Kill(-shell.pid, unix.SIGKILL)
		}
	}
	// The shell has exited but is not reaped: its pid and group are still
	// safe to signal. Collect the output, then kill what is left.
	for _, st := range streams {
		st.finish(scratch, nil)
	}
	kerr := killTree(shell, marker)
	res := Result{
		ExitCode: exitStatus(shell.wait()),
		Duration: time.Since(start),
		TimedOut: aborting,
		Output:   streams[0].buf.String(),
	}
	res.Truncated = streams[0].buf.truncated()
	if n == 2 {
		res.Stderr = streams[1].buf.String()
		res.Truncated = res.Truncated || streams[1].buf.truncated()
	}
	if ctxErr != nil {
		return res, errors.Join(fmt.Errorf("run once: command interrupted: %w", ctxErr), kerr)
	}
	if kerr != nil {
		return res, fmt.Errorf("run once: the command's processes: %w", kerr)
	}
	return res, nil
}
