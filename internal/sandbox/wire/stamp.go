package wire

import "golang.org/x/sys/unix"

// Mono reads CLOCK_MONOTONIC in nanoseconds, the clock of Stamp.
func Mono() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// Stamped appends the stamp of step, now, to stamps.
func Stamped(stamps []Stamp, step string) []Stamp {
	return append(stamps, Stamp{Step: step, Mono: Mono()})
}
