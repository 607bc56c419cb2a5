package session

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// nap waits d in the Go runtime's netpoller on a timer descriptor of its
// own, at the timer's precision. time.Sleep of less than a millisecond
// takes a whole one when the runtime has nothing else to run (its poller
// waits in milliseconds), and a nanosleep holds the thread and with it the
// one P of a sandbox's supervisor, whose other goroutines then wait (a
// 50 µs nanosleep here made forks' first commands slower, 2702949). Where
// the timer cannot be made or watched, nap is time.Sleep.
func nap(d time.Duration) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		time.Sleep(d)
		return
	}
	f := os.NewFile(uintptr(fd), "nap") // non-blocking: in the netpoller
	defer f.Close()
	its := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	if err := unix.TimerfdSettime(fd, 0, &its, nil); err != nil {
		time.Sleep(d)
		return
	}
	var expirations [8]byte
	if _, err := f.Read(expirations[:]); err != nil {
		time.Sleep(d)
	}
}
