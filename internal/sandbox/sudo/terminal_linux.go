package sudo

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// A terminal is the new pseudo-terminal a command gets when sudo runs on
// one, as Debian's sudo does by default (sudoers' use_pty): the client
// opens a pty pair from the sandbox's own devpts, gives the follower in
// place of those of its stdin, stdout and stderr that are terminals (the
// others go as they are), and the supervisor starts sudo's monitor
// (Monitor) on it, leader of a new session with it as controlling
// terminal, which starts the command in its foreground. While the command
// runs the client
// relays between the caller's terminal (its /dev/tty, the user tty) and
// the leader: the caller's terminal in raw mode, so that Ctrl-C, Ctrl-Z and
// the like reach the command's terminal as bytes and its line discipline
// signals the command's foreground job; its window size copied to the
// follower at the start and on each SIGWINCH. The caller's mode is
// restored at the end.
type terminal struct {
	user     int      // the caller's terminal, /dev/tty (blocking)
	leader   int      // the pty's leader (non-blocking)
	follower *os.File // the command's terminal, until sent
	keys     bool     // stdin is a terminal: its keys go to the command's
	saved    *unix.Termios
	wake     [2]int        // a pipe whose write end, closed, ends the relays
	cont     chan struct{} // SIGCONT: the caller's job may have come to the foreground
	ended    chan struct{} // closed by stop
	relays   sync.WaitGroup
	mu       sync.Mutex // saved and the mode of user, stopActions
	// stopActions are sudo's actions for the signals it stopped itself by
	// (suspend), until it is continued.
	stopActions map[int]sigaction
}

// openTerminal is a new pseudo-terminal for the command, or nil when the
// command runs as without one: none of stdin, stdout and stderr is a
// terminal, or the caller has no controlling terminal.
func openTerminal() (*terminal, error) {
	if !isTerminal(0) && !isTerminal(1) && !isTerminal(2) {
		return nil, nil
	}
	user, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil // no controlling terminal: sudo allocates no pty either
	}
	t := &terminal{user: user, leader: -1, keys: isTerminal(0), cont: make(chan struct{}, 1), ended: make(chan struct{}), wake: [2]int{-1, -1}}
	if err := t.open(); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

func (t *terminal) open() error {
	leader, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("unable to allocate pty: opening /dev/ptmx: %w", err)
	}
	t.leader = leader
	if err := unix.IoctlSetPointerInt(leader, unix.TIOCSPTLCK, 0); err != nil {
		return fmt.Errorf("unable to allocate pty: unlocking it: %w", err)
	}
	fd, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(leader), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if e != 0 {
		return fmt.Errorf("unable to allocate pty: opening its follower: %w", e)
	}
	t.follower = os.NewFile(fd, "sudo-pty")
	// The command's terminal starts in the caller's terminal's mode and size.
	if tio, err := unix.IoctlGetTermios(t.user, unix.TCGETS); err == nil {
		unix.IoctlSetTermios(int(fd), unix.TCSETS, tio)
	}
	t.resize()
	if err := unix.Pipe2(t.wake[:], unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("making the relay's pipe: %w", err)
	}
	return nil
}

// stdio are the descriptors the command gets: the follower for each of
// stdin, stdout and stderr that is a terminal, the caller's own for the
// others.
func (t *terminal) stdio() []int {
	fds := []int{0, 1, 2}
	for i := range fds {
		if isTerminal(i) {
			fds[i] = int(t.follower.Fd())
		}
	}
	return fds
}

// start relays between the caller's terminal and the command's, once the
// follower is sent: the caller's terminal goes raw if its keys are for
// the command and sudo is in its foreground.
func (t *terminal) start() {
	t.follower.Close()
	t.follower = nil
	t.setMode()
	t.relays.Add(2)
	go t.output()
	go t.input()
}

// stop ends the relays, once what the command wrote is copied, and puts
// the caller's terminal back as it was.
func (t *terminal) stop() {
	close(t.ended)
	if t.wake[1] >= 0 {
		unix.Close(t.wake[1])
		t.wake[1] = -1
	}
	t.relays.Wait()
	t.restore()
	t.close()
}

func (t *terminal) close() {
	for _, fd := range []int{t.user, t.leader, t.wake[0], t.wake[1]} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	if t.follower != nil {
		t.follower.Close()
	}
}

// resize copies the caller's terminal's window size to the command's; the
// kernel then sends SIGWINCH to the command's foreground job.
func (t *terminal) resize() {
	ws, err := unix.IoctlGetWinsize(t.user, unix.TIOCGWINSZ)
	if err == nil {
		unix.IoctlSetWinsize(t.leader, unix.TIOCSWINSZ, ws)
	}
}

// suspend stops sudo's process group by sig, as its command was stopped
// by it (Ctrl-Z on the command's terminal, a signal), with the caller's
// terminal back in its mode, so that the caller's shell has it while
// sudo is stopped, as sudo does. sig's action is the default until sudo
// is continued (continued puts sudo's back): set back at once, it could
// catch the signal before one of sudo's threads took it.
func (t *terminal) suspend(sig int) {
	t.restore()
	t.mu.Lock()
	if t.stopActions == nil {
		t.stopActions = map[int]sigaction{}
	}
	if _, ok := t.stopActions[sig]; !ok && sig != int(unix.SIGSTOP) {
		t.stopActions[sig] = setAction(sig, sigaction{})
	}
	t.mu.Unlock()
	unix.Kill(-unix.Getpgrp(), unix.Signal(sig))
}

// continued: sudo's job was continued, maybe into the foreground or out
// of it; the caller's terminal goes raw or back to its mode accordingly.
func (t *terminal) continued() {
	t.mu.Lock()
	for sig, act := range t.stopActions {
		setAction(sig, act)
	}
	t.stopActions = nil
	t.mu.Unlock()
	t.setMode()
	select {
	case t.cont <- struct{}{}:
	default:
	}
}

// foreground says whether sudo's process group is the caller's terminal's
// foreground job (its keys are then for sudo, and so for the command).
func (t *terminal) foreground() bool {
	pgrp, err := unix.IoctlGetInt(t.user, unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}

// setMode makes the caller's terminal raw while sudo is its foreground
// job and its stdin is the terminal, and restores it otherwise (SIGTTOU
// is ignored, so a background sudo may still restore it).
func (t *terminal) setMode() {
	if !t.keys || !t.foreground() {
		t.restore()
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.saved != nil {
		return
	}
	tio, err := unix.IoctlGetTermios(t.user, unix.TCGETS)
	if err != nil {
		return
	}
	saved := *tio
	// cfmakeraw: no input or output processing, no echo, no signals from
	// keys; bytes as they come.
	tio.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	if isTerminal(1) {
		tio.Oflag &^= unix.OPOST // else what the caller's pipeline prints keeps its \r (as sudo 1.9.14p2 on)
	}
	tio.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	tio.Cflag &^= unix.CSIZE | unix.PARENB
	tio.Cflag |= unix.CS8
	tio.Cc[unix.VMIN], tio.Cc[unix.VTIME] = 1, 0
	if unix.IoctlSetTermios(t.user, unix.TCSETSW, tio) == nil {
		t.saved = &saved
	}
}

// restore puts the caller's terminal back in the mode sudo found it in.
func (t *terminal) restore() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.saved != nil {
		unix.IoctlSetTermios(t.user, unix.TCSETSW, t.saved)
		t.saved = nil
	}
}

// output copies what the command writes to its terminal to the caller's,
// until no follower is left open or, once the command has ended (stop),
// until nothing more is there to read.
func (t *terminal) output() {
	defer t.relays.Done()
	buf := make([]byte, 32<<10)
	for {
		fds := []unix.PollFd{{Fd: int32(t.leader), Events: unix.POLLIN}, {Fd: int32(t.wake[0]), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if fds[0].Revents != 0 {
			if !t.copyOut(buf) {
				return
			}
			continue
		}
		if fds[1].Revents != 0 {
			for t.copyOut(buf) {
			}
			return
		}
	}
}

// copyOut copies one read of the leader to the caller's terminal; false
// when nothing is left to read for now (EAGAIN) or ever (EIO).
func (t *terminal) copyOut(buf []byte) bool {
	n, err := unix.Read(t.leader, buf)
	if n <= 0 || err != nil {
		return false
	}
	return writeAll(t.user, buf[:n], -1) == nil
}

// input copies the caller's keys to the command's terminal while sudo is
// its terminal's foreground job; in the background it waits to be
// continued rather than read (and be stopped by SIGTTIN).
func (t *terminal) input() {
	defer t.relays.Done()
	if !t.keys {
		return
	}
	buf := make([]byte, 4<<10)
	for {
		if !t.foreground() {
			select {
			case <-t.cont:
				continue
			case <-t.ended:
				return
			}
		}
		fds := []unix.PollFd{{Fd: int32(t.user), Events: unix.POLLIN}, {Fd: int32(t.wake[0]), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents == 0 || !t.foreground() {
			continue
		}
		n, err := unix.Read(t.user, buf)
		if n <= 0 || err != nil {
			return // the caller's terminal hung up
		}
		if writeAll(t.leader, buf[:n], t.wake[0]) != nil {
			return
		}
	}
}

// writeAll writes b to fd, waiting while a non-blocking fd is full, until
// wake (when not -1) becomes readable.
func writeAll(fd int, b []byte, wake int) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if errors.Is(err, unix.EAGAIN) {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
			if wake >= 0 {
				fds = append(fds, unix.PollFd{Fd: int32(wake), Events: unix.POLLIN})
			}
			unix.Poll(fds, -1)
			if len(fds) > 1 && fds[1].Revents != 0 {
				return errors.New("the command ended")
			}
			continue
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}
