package sbinit

import (
	"os/exec"
	"runtime"
	"sync"
)

// spawner starts every process of the sandbox from one OS thread. A child
// takes its credentials (the capability bounding set among them) and its
// namespaces from the thread that forks it, and prctl and unshare act on
// one thread: init cuts the bounding set and enters the cgroup namespace
// on its locked thread, whose goroutine then runs the spawner's loop. The
// runtime's other threads keep the full bounding set (cutting it on each
// would cost a stop-the-world per capability); none of them forks.
type spawner struct {
	reqs chan spawnReq
	// hold is held by each start, and by a reset from its OpReset to its
	// OpResetDone: no process starts while the root is being replaced.
	hold sync.RWMutex
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

func newSpawner() *spawner { return &spawner{reqs: make(chan spawnReq)} }

// start starts cmd (cmd.Start) on the spawner's thread.
func (sp *spawner) start(cmd *exec.Cmd) error {
	sp.hold.RLock()
	defer sp.hold.RUnlock()
	r := spawnReq{cmd: cmd, done: make(chan error, 1)}
	sp.reqs <- r
	return <-r.done
}

// loop serves start for as long as the process lives, on the caller's
// thread (in place, init's, already locked: the one with the cut bounding
// set; an exec'd supervisor's threads all have it).
func (sp *spawner) loop() {
	runtime.LockOSThread() // never unlocked
	for r := range sp.reqs {
		r.done <- r.cmd.Start()
	}
}

// pause waits for the starts under way and holds back the next ones until
// resume.
func (sp *spawner) pause() { sp.hold.Lock() }

// resume lets starts go on after pause.
func (sp *spawner) resume() { sp.hold.Unlock() }
