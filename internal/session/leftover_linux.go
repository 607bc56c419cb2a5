package session

import (
	"time"

	"golang.org/x/sys/unix"
)

// A leftover is a process of an interrupted command still alive when the
// command's status came back, with the program it ran then (comm). The
// shell may have forked it just before the interrupt: until the fork has
// reset bash's signal handlers, it takes SIGINT as a note to itself and
// execs the command anyway (interruptLate), and the shell, back at its
// input, has answered the recovery frame before that exec. The program it
// execs would run on unsignalled, and the shell, which still counts it as
// its foreground job, waits for it in the next command, deaf to that
// command's frame; being older than the next command, it is not one of
// that command's processes, so nothing interrupts it. Leftovers are
// therefore watched until each has exited or exec'd, and one that exec'd
// gets its SIGINT then.
type leftover struct {
	id   procID
	comm string
	// until is when a watch that lasted this long stops keeping the
	// running command's loop awake (a background subshell of the
	// interrupted command stays bash for ever); it is still looked at
	// before each command.
	until time.Time
}

// keepLeftovers records the processes the aborted command started that
// are still alive, after one last interrupt of those the earlier ones
// missed (started or exec'd since).
func (r *run) keepLeftovers(now time.Time) {
	var kept []leftover
	for _, pid := range r.newProcesses() {
		st, ok := readStat(pid)
		if !ok || !alive(st) {
			continue
		}
		if r.signaled[pid] != st.comm {
			signal([]int{pid}, unix.SIGINT)
		}
		kept = append(kept, leftover{procID{pid, st.startTime}, st.comm, now.Add(r.s.opts.KillGrace)})
	}
	r.s.leftovers = append(r.s.leftovers, kept...)
}

// checkLeftovers sends SIGINT to each leftover that has exec'd since it
// was recorded, and forgets it and those that are gone.
func (s *Session) checkLeftovers() {
	kept := s.leftovers[:0]
	for _, l := range s.leftovers {
		st, ok := readStat(l.id.pid)
		switch {
		case !ok || !alive(st) || st.startTime != l.id.startTime:
		case st.comm != l.comm:
			signal([]int{l.id.pid}, unix.SIGINT)
		default:
			kept = append(kept, l)
		}
	}
	clear(s.leftovers[len(kept):])
	s.leftovers = kept
}

// watchingLeftovers reports whether a leftover still keeps the loop
// looking every abortTick.
func (s *Session) watchingLeftovers(now time.Time) bool {
	for _, l := range s.leftovers {
		if now.Before(l.until) {
			return true
		}
	}
	return false
}
