package sandbox

import (
	"context"
	"errors"

	"github.com/minisandbox/msb/internal/sandbox/wire"
	"github.com/minisandbox/msb/internal/session"
)

func (s *Sandbox) call(ctx context.Context, req *wire.Request) (wire.Response, error) {
	if s.conn == nil {
		return wire.Response{}, ErrClosed
	}
	return s.conn.call(ctx, req)
}

// Exec runs one command in a fresh bash (no session state). An end of
// ctx interrupts the command as its timeout would (SIGINT, then SIGKILL
// after the kill grace); Exec then returns ctx.Err() once the command and
// what it started are dead.
func (s *Sandbox) Exec(ctx context.Context, req session.ExecRequest) (session.Result, error) {
	return s.execOp(ctx, &wire.Request{Op: wire.OpExec}, req)
}

func (s *Sandbox) execOp(ctx context.Context, w *wire.Request, req session.ExecRequest) (session.Result, error) {
	w.Exec = &req
	call := s.call
	if (w.Op == wire.OpExec || w.Op == wire.OpSessionExec) && s.conn != nil {
		call = s.conn.callCancel
	}
	resp, err := call(ctx, w)
	if err != nil {
		return session.Result{}, err
	}
	return resultOf(resp)
}

// SessionOptions set up a new session; empty fields take the sandbox's.
type SessionOptions struct {
	Env []string `json:"env,omitempty"`
	Dir string   `json:"dir,omitempty"`
}

// SessionStart names a session opened as part of a create
// (Config.Session) and its options.
type SessionStart struct {
	Name string `json:"name"`
	SessionOptions
}

// OpenSession starts the persistent shell name.
func (s *Sandbox) OpenSession(ctx context.Context, name string, opts SessionOptions) error {
	_, err := s.call(ctx, &wire.Request{Op: wire.OpSessionOpen, Session: name, Env: opts.Env, Dir: opts.Dir})
	return err
}

// SessionExec runs a command in session name. After the shell has exited
// (Result.SessionEnded), further calls fail with ErrSessionEnded. An end
// of ctx interrupts the command as InterruptSession would (SIGINT, then
// SIGKILL after the session's grace time); SessionExec then returns
// ctx.Err() once the command has ended, and the session stays usable.
func (s *Sandbox) SessionExec(ctx context.Context, name string, req session.ExecRequest) (session.Result, error) {
	return s.execOp(ctx, &wire.Request{Op: wire.OpSessionExec, Session: name}, req)
}

// InterruptSession interrupts what runs in session name as Ctrl-C would
// (SIGINT, then SIGKILL after the session's grace time): a SessionExec in
// flight returns its output so far with TimedOut set, and one waiting for
// the session returns an error. With none in flight, an interactive
// command waiting for input (session.ExecRequest.Interactive) is
// interrupted the same way and its end awaited. It reports how many it
// interrupted, once they have ended (waiting at most 10 s); the session
// stays usable.
func (s *Sandbox) InterruptSession(ctx context.Context, name string) (int, error) {
	resp, err := s.call(ctx, &wire.Request{Op: wire.OpSessionInterrupt, Session: name})
	return resp.Exit, err
}

// CloseSession ends session name and everything it started.
func (s *Sandbox) CloseSession(ctx context.Context, name string) error {
	_, err := s.call(ctx, &wire.Request{Op: wire.OpSessionClose, Session: name})
	return err
}

// RenameSession gives session from the name to (no live session may have
// it): a session started ahead handed to the client that asks for one.
// ErrNotFound when from does not exist or its shell has ended.
func (s *Sandbox) RenameSession(ctx context.Context, from, to string) error {
	_, err := s.call(ctx, &wire.Request{Op: wire.OpSessionRename, Session: from, To: to})
	return err
}

// Run runs argv on the sandbox's stdio (Config.Stdio, relayed through
// pipes) and returns its exit code once what it wrote has reached
// Stdio.Out and Stdio.Err. The command has no terminal.
func (s *Sandbox) Run(ctx context.Context, argv []string) (int, error) {
	resp, err := s.call(ctx, &wire.Request{Op: wire.OpRun, Argv: argv})
	return resp.Exit, errors.Join(err, s.stdio.sync(ctx))
}

// Shell runs argv (default an interactive bash) on a pty inside the
// sandbox, relayed to its stdio (which the caller has put in raw mode when
// it is a terminal), and returns once the output has been relayed.
func (s *Sandbox) Shell(ctx context.Context, argv []string, rows, cols uint16) (int, error) {
	resp, err := s.call(ctx, &wire.Request{Op: wire.OpShell, Argv: argv, Rows: rows, Cols: cols})
	return resp.Exit, errors.Join(err, s.stdio.sync(ctx))
}

// Resize changes the window size of the running Shell.
func (s *Sandbox) Resize(ctx context.Context, rows, cols uint16) error {
	_, err := s.call(ctx, &wire.Request{Op: wire.OpResize, Rows: rows, Cols: cols})
	return err
}

// ReadFile reads a regular file inside the sandbox (limit 0: 64 MiB).
func (s *Sandbox) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	resp, err := s.call(ctx, &wire.Request{Op: wire.OpReadFile, Path: path, Limit: limit})
	return resp.Data, err
}

// WriteFile writes data to path inside the sandbox, creating parent dirs.
func (s *Sandbox) WriteFile(ctx context.Context, path string, data []byte, mode uint32) error {
	_, err := s.call(ctx, &wire.Request{Op: wire.OpWriteFile, Path: path, Data: data, Mode: mode})
	return err
}

// WriteFileAs is WriteFile, the file owned by uid and gid (as the
// sandbox sees them) from its creation on.
func (s *Sandbox) WriteFileAs(ctx context.Context, path string, data []byte, mode uint32, uid, gid int) error {
	_, err := s.call(ctx, &wire.Request{Op: wire.OpWriteFile, Path: path, Data: data, Mode: mode, Owner: &wire.FileOwner{UID: uid, GID: gid}})
	return err
}

// ListDir lists a directory inside the sandbox.
func (s *Sandbox) ListDir(ctx context.Context, path string) ([]wire.Entry, error) {
	resp, err := s.call(ctx, &wire.Request{Op: wire.OpListDir, Path: path})
	return resp.Entries, err
}

// PutTar unpacks a tar stream into directory dir inside the sandbox.
func (s *Sandbox) PutTar(ctx context.Context, dir string, tarball []byte) error {
	_, err := s.call(ctx, &wire.Request{Op: wire.OpPutTar, Path: dir, Data: tarball})
	return err
}

// GetTar packs a file or directory inside the sandbox as a tar stream.
func (s *Sandbox) GetTar(ctx context.Context, path string) ([]byte, error) {
	resp, err := s.call(ctx, &wire.Request{Op: wire.OpGetTar, Path: path})
	return resp.Data, err
}
