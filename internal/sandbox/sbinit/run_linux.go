package sbinit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/minisandbox/msb/internal/envlist"
	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// run starts req.Argv on the stdio the sandbox inherited from the host (msb
// run). The command gets a session of its own, so it has no controlling
// terminal it could inject input into.
func (s *supervisor) run(req *wire.Request) (wire.Response, error) {
	if len(req.Argv) == 0 {
		return wire.Response{}, fail(wire.CodeInvalid, "empty command")
	}
	cmd := s.command(req)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err := s.spawn.start(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	return exitResponse(err, req.Argv[0])
}

func (s *supervisor) command(req *wire.Request) *exec.Cmd {
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Env = envlist.Merge(s.cfg.Env, req.Env)
	cmd.Dir = s.cfg.Workdir
	if req.Dir != "" {
		cmd.Dir = req.Dir
	}
	if lp, err := lookPath(req.Argv[0], cmd.Env); err == nil {
		cmd.Path, cmd.Env = s.wrap(lp, cmd.Env)
		cmd.Err = nil
	}
	return cmd
}

// lookPath resolves name with the sandbox's PATH rather than the supervisor's.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		if fi, err := os.Stat(name); err != nil || fi.IsDir() {
			return "", exec.ErrNotFound
		}
		return name, nil
	}
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if envlist.Name(kv) == "PATH" {
			path = kv[len("PATH="):]
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func exitResponse(err error, name string) (wire.Response, error) {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return wire.Response{}, nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return wire.Response{Exit: 128 + int(ws.Signal())}, nil
		}
		return wire.Response{Exit: ee.ExitCode()}, nil
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist):
		return wire.Response{Exit: 127}, fail(wire.CodeNotFound, "%s: command not found in the sandbox", name)
	}
	// Found but not started (EACCES, ENOEXEC, EISDIR...): a shell's 126,
	// which msb run passes on with the error.
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return wire.Response{Exit: 126}, fail(wire.CodeCommandFailed, "%s: cannot execute: %v", name, errno)
	}
	return wire.Response{Exit: 126}, fail(wire.CodeCommandFailed, "starting %s: %v", name, err)
}

// ttyRelay copies between the inherited stdio and a pty the command owns.
type ttyRelay struct {
	master *os.File
}

// shell runs req.Argv (default bash -i) on a new pty inside the sandbox and
// relays it to the inherited stdio, which the host has put in raw mode.
func (s *supervisor) shell(req *wire.Request) (wire.Response, error) {
	if len(req.Argv) == 0 {
		req.Argv = []string{"/bin/bash", "-i"}
	}
	master, slave, err := openPty()
	if err != nil {
		return wire.Response{}, err
	}
	defer master.Close()
	if req.Rows > 0 {
		unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: req.Rows, Col: req.Cols})
	}
	cmd := s.command(req)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := s.spawn.start(cmd); err != nil {
		slave.Close()
		return exitResponse(err, req.Argv[0])
	}
	slave.Close()
	s.mu.Lock()
	s.tty = &ttyRelay{master: master}
	s.mu.Unlock()
	go io.Copy(master, os.Stdin)
	done := make(chan struct{})
	go func() {
		io.Copy(os.Stdout, master) // ends with EIO once the last slave fd closes
		close(done)
	}()
	err = cmd.Wait()
	<-done
	s.mu.Lock()
	s.tty = nil
	s.mu.Unlock()
	return exitResponse(err, req.Argv[0])
}

func (s *supervisor) resize(req *wire.Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tty == nil {
		return fail(wire.CodeNotFound, "no interactive shell running")
	}
	return unix.IoctlSetWinsize(int(s.tty.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: req.Rows, Col: req.Cols})
}

func openPty() (master, slave *os.File, err error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("opening /dev/ptmx: %w", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("unlocking pty: %w", err)
	}
	sfd, _, e := unix.Syscall(unix.SYS_IOCTL, m.Fd(), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if e != 0 {
		err = e
		m.Close()
		return nil, nil, fmt.Errorf("opening pty peer: %w", err)
	}
	return m, os.NewFile(uintptr(sfd), "pty-slave"), nil
}
