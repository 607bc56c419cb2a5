package session

import (
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// waitOnce waits as a command's loop does, in a set of its own.
func waitOnce(fds []unix.PollFd, deadline time.Time) error {
	var p pollSet
	defer p.close()
	return p.wait(openGate{}, fds, deadline)
}

// TestPollSetHoldsNoThread blocks 32 waiters, each on a pipe of its own,
// and checks that the process did not make a thread for each (a wait in
// poll(2) holds one: 32 more threads), then that each waiter sees its pipe
// become readable and the others stay as they were.
func TestPollSetHoldsNoThread(t *testing.T) {
	const waiters = 32
	before := threads(t)
	var wg sync.WaitGroup
	pipes := make([][2]int, waiters)
	woke := make(chan int, waiters)
	for i := range pipes {
		r, w, err := nbPipe()
		if err != nil {
			t.Fatal(err)
		}
		pipes[i] = [2]int{r, w}
		defer unix.Close(r)
		defer unix.Close(w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fds := []unix.PollFd{{Fd: int32(r), Events: unix.POLLIN}, {Fd: int32(r), Events: unix.POLLIN}}
			if err := waitOnce(fds, time.Time{}); err != nil {
				t.Errorf("wait: %v", err)
			}
			if !readable(fds[0]) {
				t.Errorf("waiter %d returned with its pipe not readable: %+v", i, fds)
			}
			woke <- i
		}()
	}
	// Long enough for the runtime to hand the P of a waiter blocked in a
	// system call to another thread (sysmon's 20 µs to 10 ms); a shorter
	// wait could only let the count pass, not fail.
	time.Sleep(500 * time.Millisecond)
	during := threads(t)
	for i := range pipes {
		if _, err := unix.Write(pipes[i][1], []byte{1}); err != nil {
			t.Fatal(err)
		}
		if got := <-woke; got != i {
			t.Fatalf("writing to pipe %d woke waiter %d", i, got)
		}
	}
	wg.Wait()
	if during > before+4 {
		t.Fatalf("%d waiters took the process from %d to %d threads", waiters, before, during)
	}
}

// TestPollSetDeadline: a wait returns at its deadline with nothing ready,
// and at once for a deadline that has passed.
func TestPollSetDeadline(t *testing.T) {
	r, w, err := nbPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(r)
	defer unix.Close(w)
	fds := []unix.PollFd{{Fd: int32(r), Events: unix.POLLIN}, {Fd: int32(w), Events: unix.POLLOUT}}
	// The write end is ready: returned at once, both states filled in.
	if err := waitOnce(fds, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if readable(fds[0]) || fds[1].Revents&unix.POLLOUT == 0 {
		t.Fatalf("revents %+v, want the write end writable and the read end not readable", fds)
	}
	fds = fds[:1]
	deadline := time.Now().Add(50 * time.Millisecond)
	if err := waitOnce(fds, deadline); err != nil {
		t.Fatal(err)
	}
	if time.Now().Before(deadline) {
		t.Fatalf("the wait returned before its deadline with nothing ready: %+v", fds)
	}
	if fds[0].Revents != 0 {
		t.Fatalf("revents %+v at the deadline, want none", fds)
	}
	if err := waitOnce(fds, time.Now().Add(-time.Second)); err != nil || fds[0].Revents != 0 {
		t.Fatalf("a passed deadline: %v, %+v", err, fds)
	}
}

// TestPollSetReusedNumber keeps one set across waits, as a session does
// across commands: a pipe closed after one wait and a new one that got its
// descriptor number must be watched (the closed one left the epoll set;
// a set that still believed it there would wait forever).
func TestPollSetReusedNumber(t *testing.T) {
	var p pollSet
	defer p.close()
	r, w, err := nbPipe()
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		done := make(chan error, 1)
		fds := []unix.PollFd{{Fd: int32(r), Events: unix.POLLIN}}
		// A set that missed the pipe returns at the deadline, its pipe unread.
		go func() { done <- p.wait(openGate{}, fds, time.Now().Add(10*time.Second)) }()
		time.Sleep(20 * time.Millisecond) // the waiter in the netpoller, mostly; either way it must wake
		unix.Write(w, []byte{1})
		if err := <-done; err != nil || !readable(fds[0]) {
			t.Fatalf("round %d: %v, revents %+v", round, err, fds)
		}
		unix.Close(r)
		unix.Close(w)
		nr, nw, err := nbPipe()
		if err != nil {
			t.Fatal(err)
		}
		if nr != r {
			t.Logf("round %d: the new pipe's read end is %d, not %d", round, nr, r)
		}
		r, w = nr, nw
	}
	unix.Close(r)
	unix.Close(w)
}

func threads(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
