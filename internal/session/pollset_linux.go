package session

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pollSet waits until one of a list of descriptors is ready, as poll(2)
// does, but in the Go runtime's netpoller: a goroutine blocked in a system
// call holds an OS thread, so every command in flight held one, and in a
// sandbox's supervisor those threads count against the pids limit a fork
// bomb fills (a Go runtime that cannot make a thread it needs dies; see
// Gate). The descriptors go into an epoll set of the pollSet's own, whose
// descriptor the netpoller watches: it becomes readable when one of them
// is ready. A session keeps its set from one command to the next (one
// made for each wait cost a session round trip ~25 µs more than poll(2)),
// so a wait changes only what changed. The zero value is ready to use.
type pollSet struct {
	file *os.File         // the epoll set; nil until the first wait that blocks
	ep   int              // file's descriptor (file.Fd would make it blocking)
	rc   syscall.RawConn  // file's
	reg  map[int32]uint32 // the descriptors in the set and their events
	// blocking: the set could not be made or the netpoller would not take
	// it; poll(2) it is.
	blocking bool
}

// wait waits until one of fds is ready or until the deadline (zero: none),
// and leaves each one's state in its Revents. The caller is inside gate,
// which it leaves while it waits, if nothing is ready yet, and enters
// again before it returns.
func (p *pollSet) wait(gate Gate, fds []unix.PollFd, deadline time.Time) error {
	if ready, err := pollNow(fds); ready || err != nil {
		return err
	}
	if !deadline.IsZero() && !time.Now().Before(deadline) {
		return nil
	}
	gate.Leave()
	defer gate.Enter()
	if p.blocking || p.sync(fds) != nil {
		p.blocking = true
		return pollBlocking(fds, deadline)
	}
	if err := p.file.SetReadDeadline(deadline); err != nil { // zero: none
		p.blocking = true
		return pollBlocking(fds, deadline)
	}
	var pollErr error
	err := p.rc.Read(func(uintptr) bool {
		ready, err := pollNow(fds)
		pollErr = err
		return ready || err != nil
	})
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		_, err = pollNow(fds) // the state at the deadline
		return err
	case err != nil:
		p.blocking = true // the netpoller did not take the set
		return pollBlocking(fds, deadline)
	}
	return pollErr
}

// sync makes the set watch fds and nothing else. A descriptor listed twice
// gets the union of its events. Each one is modified, or added where that
// finds it missing: a descriptor closed since the last wait left the set,
// and its number may now be another pipe's.
func (p *pollSet) sync(fds []unix.PollFd) error {
	if p.file == nil {
		if err := p.open(); err != nil {
			return err
		}
	}
	for fd := range p.reg {
		if !listed(fds, fd) {
			unix.EpollCtl(p.ep, unix.EPOLL_CTL_DEL, int(fd), nil) // ENOENT, EBADF: closed meanwhile
			delete(p.reg, fd)
		}
	}
	for i, pfd := range fds {
		if pfd.Fd < 0 || listed(fds[:i], pfd.Fd) {
			continue
		}
		e := unix.EpollEvent{Events: eventsOf(fds[i:], pfd.Fd), Fd: pfd.Fd}
		err := unix.EpollCtl(p.ep, unix.EPOLL_CTL_MOD, int(pfd.Fd), &e)
		if errors.Is(err, unix.ENOENT) {
			err = unix.EpollCtl(p.ep, unix.EPOLL_CTL_ADD, int(pfd.Fd), &e)
		}
		if err != nil {
			return err
		}
		p.reg[pfd.Fd] = e.Events
	}
	return nil
}

// open makes the epoll set, non-blocking, so that os.NewFile registers it
// with the netpoller.
func (p *pollSet) open() error {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	if err := unix.SetNonblock(ep, true); err != nil {
		unix.Close(ep)
		return err
	}
	f := os.NewFile(uintptr(ep), "session-pollset")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return err
	}
	p.file, p.ep, p.rc, p.reg = f, ep, rc, map[int32]uint32{}
	return nil
}

// close closes the set; the zero value again.
func (p *pollSet) close() {
	if p.file != nil {
		p.file.Close()
	}
	*p = pollSet{}
}

// pollNow fills fds' Revents without waiting and reports whether one is
// ready.
func pollNow(fds []unix.PollFd) (bool, error) {
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		return n > 0, err
	}
}

// pollBlocking is poll(2) itself, holding the thread while it waits.
func pollBlocking(fds []unix.PollFd, deadline time.Time) error {
	ms := -1
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if d < 0 {
			d = 0
		}
		ms = int((d + time.Millisecond - 1) / time.Millisecond)
	}
	_, err := unix.Poll(fds, ms)
	if err == unix.EINTR {
		return nil
	}
	return err
}

func listed(fds []unix.PollFd, fd int32) bool {
	for _, p := range fds {
		if p.Fd == fd {
			return true
		}
	}
	return false
}

// eventsOf is the union of the events fds ask of fd (POLLIN and POLLOUT
// are EPOLLIN and EPOLLOUT).
func eventsOf(fds []unix.PollFd, fd int32) uint32 {
	var ev uint32
	for _, p := range fds {
		if p.Fd == fd {
			ev |= uint32(uint16(p.Events))
		}
	}
	return ev
}
