package sbinit

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/minisandbox/msb/internal/sandbox/sudo"
	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// listenSudo opens sudo.Socket for every user of the sandbox, before the
// supervisor says ready (wire.Config.Sudo).
func listenSudo() (*net.UnixListener, error) {
	os.Remove(sudo.Socket)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sudo.Socket, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listening on the sudo socket %s: %w", sudo.Socket, err)
	}
	if err := os.Chmod(sudo.Socket, 0o666); err != nil {
		l.Close()
		return nil, fmt.Errorf("opening the sudo socket %s to the sandbox's users: %w", sudo.Socket, err)
	}
	return l, nil
}

// serveSudo answers each sudo client of l in a goroutine of its own, for
// as long as the supervisor lives.
func (s *supervisor) serveSudo(l *net.UnixListener) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // EMFILE and the like: the next client may fare better
		}
		go s.sudo(c)
	}
}

// sudo serves one client: its stdio, its request, the signals it passes
// on; then the command's end.
func (s *supervisor) sudo(c *net.UnixConn) {
	defer c.Close()
	stdio, err := recvStdio(c)
	if err != nil {
		wire.WriteFrame(c, sudo.Reply{Exit: 1, Error: err.Error()})
		return
	}
	var req sudo.Request
	if err := wire.ReadFrame(c, &req); err != nil {
		closeAll(stdio)
		return
	}
	wire.WriteFrame(c, s.sudoRun(c, req, stdio))
}

// recvStdio reads the byte the client sends its stdin, stdout and stderr
// with.
func recvStdio(c *net.UnixConn) ([]*os.File, error) {
	oob := make([]byte, unix.CmsgSpace(3*4))
	_, oobn, _, _, err := c.ReadMsgUnix(make([]byte, 1), oob)
	if err != nil {
		return nil, fmt.Errorf("reading the client's stdio: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err == nil {
			fds = append(fds, got...)
		}
	}
	var files []*os.File
	for _, fd := range fds {
		unix.CloseOnExec(fd)
		files = append(files, os.NewFile(uintptr(fd), "sudo-stdio"))
	}
	if err != nil || len(files) != 3 {
		closeAll(files)
		return nil, fmt.Errorf("the client sent %d descriptors, not its stdin, stdout and stderr", len(files))
	}
	return files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// sudoRun starts req as its user on stdio, passes the client's signals
// on, kills the command if the client goes away first, and answers how
// the command ended.
func (s *supervisor) sudoRun(c *net.UnixConn, req sudo.Request, stdio []*os.File) sudo.Reply {
	if len(req.Argv) == 0 {
		closeAll(stdio)
		return sudo.Reply{Exit: 1, Error: "empty command"}
	}
	cmd := &exec.Cmd{Path: req.Argv[0], Args: req.Argv, Env: req.Env, Dir: req.Dir,
		Stdin: stdio[0], Stdout: stdio[1], Stderr: stdio[2]}
	groups := make([]uint32, len(req.Groups))
	for i, g := range req.Groups {
		groups[i] = uint32(g)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(req.UID), Gid: uint32(req.GID), Groups: groups,
		NoSetGroups: !canSetGroups()}}
	cmd.Path, cmd.Env = s.wrap(cmd.Path, cmd.Env)
	var mon *monitor
	if req.Terminal {
		var err error
		if cmd, mon, err = monitored(cmd, stdio, req.UID); err != nil {
			closeAll(stdio)
			return sudo.Reply{Exit: 1, Error: err.Error()}
		}
	}
	err := s.spawn.start(cmd)
	closeAll(stdio) // the command holds them now
	if mon != nil {
		mon.theirs.Close()
		if err != nil {
			mon.mine.Close()
		}
	}
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) {
		return sudo.Reply{Exit: 1, Error: fmt.Sprintf("%s as uid %d, gid %d: %v: the sandbox's supervisor runs as uid %d, and gives no user it cannot be (rootless: ids it does not map)",
			req.Argv[0], req.UID, req.GID, err, os.Getuid())}
	}
	if err != nil {
		return sudo.Reply{Exit: 1, Error: fmt.Sprintf("%s: %v", req.Argv[0], err)}
	}
	done := make(chan struct{})
	var relaying sync.WaitGroup
	if mon != nil {
		relaying.Add(1)
		go func() {
			defer relaying.Done()
			mon.relay(c)
		}()
	}
	go func() {
		for {
			var ctl sudo.Control
			if wire.ReadFrame(c, &ctl) != nil {
				select {
				case <-done:
				default:
					cmd.Process.Kill() // no one waits for it any more
				}
				return
			}
			if ctl.Signal > 0 && ctl.Signal < 65 {
				cmd.Process.Signal(syscall.Signal(ctl.Signal))
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	relaying.Wait() // the reply is the connection's last frame
	res, _ := exitResponse(err, req.Argv[0])
	rep := sudo.Reply{Exit: res.Exit}
	if cmd.ProcessState != nil {
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			rep.Signal = int(ws.Signal())
		}
	}
	return rep
}

// A monitor is sudo's monitor process (see package sudo) between the
// supervisor and a command on a terminal of its own.
type monitor struct {
	mine, theirs *os.File // the two ends of its socket
	spec         sudo.MonitorSpec
}

// monitored is cmd run by a monitor: the sandbox's init binary as the
// command's user, in a new session whose controlling terminal is the
// first of stdio that is a terminal (the follower of the client's new
// pty), which goes to that user, as sudo gives its pty to the user it runs
// the command as.
func monitored(cmd *exec.Cmd, stdio []*os.File, uid int) (*exec.Cmd, *monitor, error) {
	ctty := -1
	for i, f := range stdio {
		if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err == nil {
			ctty = i
			break
		}
	}
	if ctty < 0 {
		return nil, nil, errors.New("the client asked for a terminal but sent none of its stdio as one")
	}
	if err := stdio[ctty].Chown(uid, -1); err != nil {
		return nil, nil, fmt.Errorf("giving the command's terminal to uid %d: %v", uid, err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("making the socket of sudo's monitor: %w", err)
	}
	mon := &monitor{mine: os.NewFile(uintptr(fds[0]), "sudo-monitor"), theirs: os.NewFile(uintptr(fds[1]), "sudo-monitor"),
		spec: sudo.MonitorSpec{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Ctty: ctty}}
	attr := *cmd.SysProcAttr
	attr.Setsid, attr.Setctty, attr.Ctty = true, true, ctty
	m := &exec.Cmd{Path: "/proc/self/exe", Args: []string{"sudo-monitor"}, Env: []string{EnvStage + "=" + StageSudoMonitor},
		Dir: cmd.Dir, Stdin: cmd.Stdin, Stdout: cmd.Stdout, Stderr: cmd.Stderr, ExtraFiles: []*os.File{mon.theirs}, SysProcAttr: &attr}
	return m, mon, nil
}

// relay sends the monitor its command, then passes the stops it reports
// on to the client, until the monitor ends.
func (mon *monitor) relay(c *net.UnixConn) {
	defer mon.mine.Close()
	if wire.WriteFrame(mon.mine, mon.spec) != nil {
		return
	}
	for {
		var rep sudo.Reply
		if wire.ReadFrame(mon.mine, &rep) != nil {
			return
		}
		if rep.Stopped > 0 {
			wire.WriteFrame(c, sudo.Reply{Stopped: rep.Stopped})
		}
	}
}

// canSetGroups says whether this process may call setgroups: not in a
// rootless sandbox's user namespace, whose /proc/self/setgroups says deny
// (its commands keep the groups they have).
func canSetGroups() bool {
	b, err := os.ReadFile("/proc/self/setgroups")
	return err != nil || string(b) != "deny\n"
}

// StageSudoMonitor is the stage of sudo's monitor (sudo.Monitor).
const StageSudoMonitor = "sudo-monitor"
