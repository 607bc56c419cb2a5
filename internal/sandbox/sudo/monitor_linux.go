package sudo

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// The monitor is what sudo's monitor process is: the leader of the
// session whose controlling terminal is the command's new pty, and the
// command's parent, the command in a process group of its own in the
// foreground of that terminal. The supervisor cannot be that parent: it is
// in another session, so the command's group would be orphaned, and the
// kernel drops the stop signals of Ctrl-Z (SIGTSTP, SIGTTIN, SIGTTOU) sent
// to an orphaned group. The supervisor starts the monitor (the sandbox's
// init binary, as the command's user, in a new session with the terminal)
// and hands it a MonitorSpec over the socket MonitorFd; the monitor starts
// the command, reports each stop of it on that socket as a Reply with
// Stopped (the supervisor passes those on to sudo, which stops too), on
// SIGCONT (sudo continued) continues the command's group, passes other signals on to the command, and ends as
// the command ended: its exit status, or killed by the same signal.

// MonitorFd is the monitor's socket to the supervisor.
const MonitorFd = 3

// MonitorSpec is the command the monitor starts: its program (perhaps a
// wrapper that sets rlimits first), arguments and environment, and which
// of stdin, stdout and stderr is the terminal.
type MonitorSpec struct {
	Path string   `json:"path"`
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Ctty int      `json:"ctty"`
}

// Monitor runs the monitor; it returns the exit status for a command that
// exited, or 1 when the command did not start.
func Monitor() int {
	unix.CloseOnExec(MonitorFd)
	sup := os.NewFile(MonitorFd, "sudo-monitor")
	var spec MonitorSpec
	if err := wire.ReadFrame(sup, &spec); err != nil {
		fmt.Fprintf(os.Stderr, "sudo: reading the command from the sandbox's supervisor: %v\n", err)
		return 1
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1,
		syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGCONT, syscall.SIGTSTP)
	cmd := &exec.Cmd{Path: spec.Path, Args: spec.Args, Env: spec.Env, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Foreground: true, Ctty: spec.Ctty}}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "sudo: unable to execute %s: %v\n", spec.Args[0], errors.Unwrap(err))
		return 1
	}
	pid := cmd.Process.Pid
	go func() {
		for s := range sigs {
			if s == syscall.SIGCONT { // the command's group is still its terminal's foreground one
				unix.Kill(-pid, unix.SIGCONT)
				continue
			}
			unix.Kill(pid, s.(syscall.Signal))
		}
	}()
	for {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, unix.WUNTRACED, nil); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			fmt.Fprintf(os.Stderr, "sudo: waiting for %s: %v\n", spec.Args[0], err)
			return 1
		}
		switch {
		case ws.Stopped():
			wire.WriteFrame(sup, Reply{Stopped: int(ws.StopSignal())})
		case ws.Signaled():
			signal.Stop(sigs)
			dieBy(int(ws.Signal()))
			return 128 + int(ws.Signal())
		default:
			return ws.ExitStatus()
		}
	}
}
