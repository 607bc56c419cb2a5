package session

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair. The session gives the slave to the
// shell as its start-up stderr only so that bash has a terminal to restore
// settings on; no data flows through it after start-up, so the master is
// never read.
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
