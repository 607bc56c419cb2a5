package session

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair. The session gives the slave to the
// shell as its start-up stderr so that bash has a terminal to restore
// settings on, and makes it the terminal of interactive commands (see
// prepareTerminal).
func openPTY() (master int, slave *os.File, err error) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, nil, err
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(m)
		return -1, nil, err
	}
	// TIOCGPTPEER opens the slave without a path lookup (Linux 4.13+).
	fd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER,
		uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno == 0 {
		return m, os.NewFile(fd, "pty slave"), nil
	}
	n, err := unix.IoctlGetUint32(m, unix.TIOCGPTN)
	if err != nil {
		unix.Close(m)
		return -1, nil, err
	}
	f, err := os.OpenFile("/dev/pts/"+strconv.FormatUint(uint64(n), 10), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		unix.Close(m)
		return -1, nil, err
	}
	return m, f, nil
}

// prepareTerminal makes the pty the terminal of interactive commands and
// returns its slave's path, which their frames open as stdin (the first
// such open makes it the shell's controlling terminal, which is harmless:
// the engine holds both ends until Close, so it never hangs up). Input is
// line by line (canonical) as at a terminal, but not echoed (what the
// caller sends is not output) and control characters are data, not
// signals (interrupts go through the session's own interrupt, which knows
// which processes are the command's). The master becomes non-blocking.
func prepareTerminal(master int) (string, error) {
	t, err := unix.IoctlGetTermios(master, unix.TCGETS)
	if err != nil {
		return "", err
	}
	t.Lflag &^= unix.ECHO | unix.ECHOE | unix.ECHOK | unix.ECHONL | unix.ECHOCTL | unix.ISIG | unix.IEXTEN
	t.Lflag |= unix.ICANON
	t.Oflag &^= unix.ONLCR // "\n" written to the terminal stays "\n" in the output
	if err := unix.IoctlSetTermios(master, unix.TCSETS, t); err != nil {
		return "", err
	}
	n, err := unix.IoctlGetUint32(master, unix.TIOCGPTN)
	if err != nil {
		return "", err
	}
	if err := unix.SetNonblock(master, true); err != nil {
		return "", err
	}
	return "/dev/pts/" + strconv.FormatUint(uint64(n), 10), nil
}

// flushInput discards input that an earlier interactive command left
// unread, so that it never reaches the next one.
func flushInput(master int) {
	_ = unix.IoctlSetInt(master, unix.TCFLSH, unix.TCIFLUSH)
}
