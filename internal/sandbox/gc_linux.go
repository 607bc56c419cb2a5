package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/cgroup"
	"github.com/minisandbox/msb/internal/sandbox/pool"
	"golang.org/x/sys/unix"
)

// GCReport says what GC found and removed. Sandboxes, Processes and Cgroups
// are what owners that died left; StaleCgroups are empty groups under the
// shared msb parent that no sandbox of this state dir names (old enough
// that no sandbox is being made in them): tidying, not a sign of a crash.
type GCReport struct {
	Sandboxes    []string `json:"sandboxes"`               // state dirs of dead owners removed
	Processes    []int    `json:"processes"`               // init pids killed
	Cgroups      []string `json:"cgroups"`                 // cgroup dirs of dead owners' sandboxes removed
	StaleCgroups []string `json:"stale_cgroups,omitempty"` // empty, old cgroup dirs removed
	Volumes      []string `json:"volumes,omitempty"`       // disk pool volumes of dead owners removed
	Errors       []string `json:"errors,omitempty"`        // what could not be removed
}

// Found reports whether GC collected anything a dead owner left.
func (r GCReport) Found() bool { return len(r.Sandboxes)+len(r.Volumes) > 0 }

// newDirPrefix marks a state dir whose owner has not yet taken its lock:
// a sandbox's dir is made under this name, locked, then renamed, so GC
// never sees an unlocked dir of a live owner under a sandbox's name.
const newDirPrefix = ".new-"

// staleNewDir is how long a dir under newDirPrefix may stay before GC takes
// its owner for dead (the owner renames it microseconds after mkdir).
const staleNewDir = time.Minute

// newOwnedDir makes the state dir of sandbox id in stateDir with its owner
// lock taken, and returns the lock (held for the sandbox's life) and the dir.
func newOwnedDir(stateDir, id string) (*os.File, string, error) {
	tmp := filepath.Join(stateDir, newDirPrefix+id)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, "", fmt.Errorf("creating sandbox state dir: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(tmp, "lock"), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err == nil {
		err = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != nil {
			lock.Close()
		}
	}
	dir := filepath.Join(stateDir, id)
	if err == nil {
		if err = os.Rename(tmp, dir); err != nil {
			lock.Close()
		}
	}
	if err != nil {
		os.RemoveAll(tmp)
		return nil, "", fmt.Errorf("taking owner lock of %s: %w", dir, err)
	}
	return lock, dir, nil
}

// GC removes what sandboxes whose owning msb died left behind: their init
// (and so every process in them), cgroups and state dirs. Ownership is
// proven by the owner lock, held by the owner for the sandbox's whole life:
// a dir whose lock is held, by this process or another, is untouched, and
// an init is killed only when its pid still names the process that was
// started (its start time matches info.json), so a pid reused by another
// daemon's sandbox is left alone.
func (rt *Runtime) GC() GCReport {
	rep := GCReport{Sandboxes: []string{}, Processes: []int{}, Cgroups: []string{}}
	ents, err := os.ReadDir(rt.stateDir)
	if err != nil {
		rep.Errors = append(rep.Errors, err.Error())
		return rep
	}
	dead := map[string]bool{}
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, "kept-") {
			continue
		}
		if strings.HasPrefix(name, ".") {
			rt.collectNewDir(&rep, name)
			continue
		}
		dir := filepath.Join(rt.stateDir, name)
		release, ok := tryLock(dir)
		if !ok {
			continue
		}
		dead[name] = true
		if pid := killInit(dir); pid > 0 {
			rep.Processes = append(rep.Processes, pid)
		}
		if err := unmountRestored(dir); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		}
		if err := RemoveAll(dir); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		} else {
			rep.Sandboxes = append(rep.Sandboxes, dir)
		}
		release()
	}
	if rt.cg.Usable() {
		// Only the cgroups of sandboxes found dead above are killed and
		// removed. The msb parent cgroup is shared by every state dir and
		// user on the host: a group this runtime has no state for may
		// belong to a live sandbox of another runtime, so it is at most
		// removed when empty and old (cgroup.StaleEmpty).
		for name, dirs := range cgroup.Leftovers(rt.cg, func(name string) bool { return dead[name] }) {
			if err := cgroup.RemoveDirs(dirs); err != nil {
				rep.Errors = append(rep.Errors, fmt.Sprintf("cgroup %s: %v", name, err))
				continue
			}
			rep.Cgroups = append(rep.Cgroups, dirs...)
		}
		rep.StaleCgroups = cgroup.RemoveStaleEmpty(rt.cg, time.Minute)
	}
	rt.collectVolumes(&rep)
	return rep
}

// collectVolumes deletes the disk pool's volumes whose owners died, of
// this state dir or any other (see pool.Reclaim: a live owner's volume is
// never touched). It never makes a pool. The volume of a sandbox whose init
// was killed above stays busy until the kernel has torn its mount
// namespace down: that takes a moment, which it waits for.
func (rt *Runtime) collectVolumes(rep *GCReport) {
	if rt.rootless || !pool.Exists(rt.poolDir()) {
		return
	}
	d := rt.disk()
	if d.pool == nil {
		return
	}
	rep.Volumes = append(rep.Volumes, d.reclaimed.take()...)
	for try := 0; ; try++ {
		r := rt.reclaim(d.pool)
		rep.Volumes = append(rep.Volumes, r.Removed...)
		if len(r.Busy) == 0 || try == 50 || len(rep.Processes) == 0 {
			for _, err := range r.Errors {
				rep.Errors = append(rep.Errors, err.Error())
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// collectNewDir removes a dir a sandbox's creation left under newDirPrefix
// when its owner is gone: its lock is free and it is older than staleNewDir.
// No process ran from it (init starts after the rename).
func (rt *Runtime) collectNewDir(rep *GCReport, name string) {
	if !strings.HasPrefix(name, newDirPrefix) {
		return
	}
	dir := filepath.Join(rt.stateDir, name)
	st, err := os.Stat(dir)
	if err != nil || time.Since(st.ModTime()) < staleNewDir {
		return
	}
	release, ok := tryLock(dir)
	if !ok {
		return
	}
	defer release()
	if err := RemoveAll(dir); err != nil {
		rep.Errors = append(rep.Errors, err.Error())
		return
	}
	rep.Sandboxes = append(rep.Sandboxes, dir)
}

// tryLock takes the owner lock of a sandbox state dir; it succeeds only when
// the owner is gone. A dir appears under a sandbox's name with its lock
// already held (newOwnedDir), so a free lock never belongs to a live owner.
// The lock file is never created here: an owner removing its dir may have
// unlinked it already, and a new file would be a lock nobody holds. A dir
// without one is taken as abandoned only when nothing changed in it for
// staleNewDir (an owner that died while removing it).
func tryLock(dir string) (release func(), ok bool) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|unix.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		st, err := os.Stat(dir)
		return func() {}, err == nil && time.Since(st.ModTime()) > staleNewDir
	}
	if err != nil {
		return nil, false
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return func() { f.Close() }, true
}

// killInit kills the sandbox's init if it still runs; the kernel then kills
// every process in the sandbox's PID namespace. The pid is opened as a pidfd
// and its start time compared with the one recorded at creation before the
// signal goes through that pidfd, so neither a pid reused since (by any
// process, another sandbox's init included) nor one reused between the
// check and the kill is signalled. An info.json without a start time (made
// by an older msb) falls back to the init's command line.
func killInit(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "info.json"))
	if err != nil {
		return 0
	}
	var info stateInfo
	if json.Unmarshal(b, &info) != nil || info.InitPid <= 0 {
		return 0
	}
	pidfd, err := unix.PidfdOpen(info.InitPid, 0)
	if err != nil {
		return 0 // gone
	}
	defer unix.Close(pidfd)
	if !isInit(info) {
		return 0
	}
	if unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0) != nil {
		return 0
	}
	// The pidfd turns readable when the process exits.
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	unix.Poll(fds, 1000)
	return info.InitPid
}

// isInit reports whether info's pid still names the init it recorded.
func isInit(info stateInfo) bool {
	if info.InitStart != 0 {
		start, err := procStart(info.InitPid)
		return err == nil && start == info.InitStart
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(info.InitPid) + "/cmdline")
	return err == nil && strings.HasPrefix(string(cmdline), "msb-sandbox-init")
}

// procStart is the start time of process pid, in clock ticks after boot
// (field 22 of /proc/<pid>/stat).
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it start after its last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	const startField = 22 - 3 // fields after the name start at field 3
	if len(f) <= startField {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	return strconv.ParseUint(f[startField], 10, 64)
}
