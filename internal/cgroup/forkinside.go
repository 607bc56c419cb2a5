package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// StartInside runs start (which starts a process, e.g. exec.Cmd.Start)
// on an OS thread of its own that is a member of the group's cgroups
// while start runs: the process it forks is born in the group, as with
// CLONE_INTO_CGROUP on v2 (OpenForClone), and needs no Add. It is for v1,
// where a process moved by Add waits for an RCU grace period (the move
// takes cgroup_threadgroup_rwsem for writing; see AttachWait), while a
// thread that moves itself, writing "0" to a hierarchy's tasks file,
// skips that lock: about 0.1 ms for the move in and the move back
// against 5 to 10 ms for one Add (docs/bench.md).
//
// The thread is locked to the goroutine running start, so no other
// goroutine runs in the group, and the Go runtime makes no thread of
// its own from it (it hands a locked thread's thread creation to another
// thread). Afterwards the thread moves back to its cgroups (or else to
// the hierarchies' roots); should that fail too, the thread is ended with
// its goroutine rather than left in the group. inside reports whether
// start ran in the group: false with a nil error when the thread could
// not join it (start then ran outside, and the caller should Add the
// process).
func (g *Group) StartInside(start func() error) (inside bool, err error) {
	done := make(chan startResult, 1)
	// The thread's bookkeeping (home.leave) ends before the result is
	// sent: a caller's next start must not count this one as still in
	// flight, or its failed move back would skip reading msb's cgroups
	// again (reread) and go to the roots.
	go func() {
		r := g.startOnThread(start)
		done <- r
		if r.park {
			select {} // the thread stays locked to this goroutine, alive, for good
		}
	}()
	r := <-done
	return r.inside, r.err
}

// ErrStranded, in the error of StartInside's start, says that start left
// the calling thread locked where no other goroutine may run (in a
// sandbox's network namespace, say) and that the thread must not end
// either: a thread's end sends SIGKILL to every process it spawned with
// Pdeathsig, sandboxes' inits. StartInside's goroutine then blocks for
// good, once the thread is out of the group, keeping the thread.
var ErrStranded = errors.New("a thread of msb is parked for good")

// startResult is what StartInside's thread did.
type startResult struct {
	inside bool
	err    error
	park   bool // start stranded the thread (ErrStranded), which is back in its cgroups
}

// startOnThread locks the calling goroutine's thread, moves it into g,
// runs start and moves it back. A thread that could not be moved back
// stays locked, so that it ends with its goroutine; one that start
// stranded (ErrStranded) is parked by StartInside instead.
func (g *Group) startOnThread(start func() error) startResult {
	runtime.LockOSThread() // unlocked only once the thread is back where it was
	back, err := home.enter()
	defer home.leave()
	if err != nil {
		runtime.UnlockOSThread()
		serr := start()
		return startResult{false, serr, errors.Is(serr, ErrStranded)}
	}
	entered, err := g.moveThread(back, true)
	if err != nil {
		if berr := g.leave(back); berr != nil {
			return startResult{false, fmt.Errorf("%w; moving the thread back: %w", err, berr), false} // the thread ends locked
		}
		runtime.UnlockOSThread()
		serr := start()
		return startResult{false, serr, errors.Is(serr, ErrStranded)}
	}
	serr := start()
	if berr := g.leave(back); berr != nil {
		// The process may have started; the caller's cleanup kills it
		// (the group) and this thread ends, leaving the group.
		return startResult{entered, errors.Join(serr, fmt.Errorf("moving the starting thread back out of the sandbox's cgroup: %w", berr)), false}
	}
	runtime.UnlockOSThread() // start's own lock, if it stranded the thread, holds
	return startResult{entered, serr, errors.Is(serr, ErrStranded)}
}

// leave moves the calling thread back to its cgroups (back). Should that
// fail (msb was moved since back was read, and its old cgroup removed),
// it reads msb's cgroups again and moves there; and should that fail too,
// to the root of each hierarchy: a thread of msb left in a sandbox's
// group would be killed with it (with all of msb, as the kill goes to the
// processes the group lists).
func (g *Group) leave(back map[string]string) error {
	_, err := g.moveThread(back, false)
	if err == nil {
		return nil
	}
	if fresh, ok := home.reread(); ok {
		if _, ferr := g.moveThread(fresh, false); ferr == nil {
			return nil
		}
	}
	roots := map[string]string{}
	for c := range g.dirs {
		roots[c] = "/"
	}
	if _, rerr := g.moveThread(roots, false); rerr != nil {
		return errors.Join(err, rerr)
	}
	return nil
}

// moveThread writes "0" to the tasks file of each of the group's
// hierarchies (in) or of the thread's own cgroup in it (back, !in): the
// calling thread moves there. It reports whether it moved into every one.
func (g *Group) moveThread(back map[string]string, in bool) (bool, error) {
	if g.info.Version != V1 {
		return false, errors.New("a thread moves by itself only on cgroup v1")
	}
	for c, dir := range g.dirs {
		if !in {
			own, ok := back[c]
			if !ok {
				return false, fmt.Errorf("this thread's cgroup in the %s hierarchy is unknown", c)
			}
			dir = filepath.Join(Root, c, own)
		}
		p := filepath.Join(dir, "tasks")
		if err := os.WriteFile(p, []byte("0"), 0); err != nil {
			return false, fmt.Errorf("moving a thread into %s: %w", dir, err)
		}
	}
	return in, nil
}

// home is the cgroups msb's threads go back to after StartInside.
var home = &homeGroups{read: readCgroups}

// homeGroups keeps msb's cgroups, read once from /proc/self/cgroup (its
// main thread's) while no thread of msb is moved (inside == 0): during a
// StartInside, the main thread may be the moved one. /proc/thread-self
// would need no such care, but a thread's entry read there made the
// reaping of msb's process cost its parent ~3 ms of dcache walking (perf,
// docs/bench.md); read once, it costs a create nothing (it was ~20 µs on
// every v1 create). msb may be moved to other cgroups while it runs (by an
// administrator; msb never moves itself as root): a move back that then
// fails (the old cgroup removed) has the reading made again (reread). A
// move back into an old cgroup that is still there succeeds, so until
// that one goes, StartInside's threads return there, not where the rest
// of msb is.
type homeGroups struct {
	read func(file string) (map[string]string, error) // readCgroups

	mu     sync.Mutex // guards the fields below
	inside int        // threads between enter and leave
	groups map[string]string
	err    error // of the reading of groups (nil groups: read again)
	stale  bool  // groups failed a move back: read again at the next chance
}

// enter counts the calling thread as moved (leave uncounts it, whatever
// enter returned) and returns msb's cgroups, reading them when there is
// no reading yet, or a stale one, and no thread is moved.
func (h *homeGroups) enter() (map[string]string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inside == 0 && (h.groups == nil || h.stale) {
		h.groups, h.err = h.read("/proc/self/cgroup")
		h.stale = false
	}
	h.inside++
	return h.groups, h.err
}

func (h *homeGroups) leave() {
	h.mu.Lock()
	h.inside--
	h.mu.Unlock()
}

// reread is for a thread between enter and leave whose move back failed:
// it marks the reading stale and, when the calling thread is the only
// moved one (so every other thread is where msb is), reads msb's cgroups
// again at once: the main thread's, or when the caller is the main
// thread, another thread's (this rare path may pay the dcache cost).
func (h *homeGroups) reread() (map[string]string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stale = true
	if h.inside != 1 {
		return nil, false
	}
	file := "/proc/self/cgroup"
	if tid := unix.Gettid(); tid == unix.Getpid() {
		other, err := otherThread(tid)
		if err != nil {
			return nil, false
		}
		file = fmt.Sprintf("/proc/self/task/%d/cgroup", other)
	}
	groups, err := h.read(file)
	if err != nil {
		return nil, false
	}
	h.groups, h.stale = groups, false
	return groups, true
}

// otherThread is a thread of this process other than tid.
func otherThread(tid int) (int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		if id, err := strconv.Atoi(e.Name()); err == nil && id != tid {
			return id, nil
		}
	}
	return 0, errors.New("no other thread in /proc/self/task")
}

// readCgroups maps each v1 controller to the cgroup in its hierarchy that
// file (/proc/self/cgroup or a thread's) names.
func readCgroups(file string) (map[string]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("reading msb's cgroups: %w", err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, sc.Err()
}
