package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/minisandbox/msb/internal/cgroup"
	"golang.org/x/sys/unix"
)

// GCReport says what GC found and removed.
type GCReport struct {
	Sandboxes []string `json:"sandboxes"`        // state dirs of dead owners removed
	Processes []int    `json:"processes"`        // init pids killed
	Cgroups   []string `json:"cgroups"`          // cgroup dirs removed
	Errors    []string `json:"errors,omitempty"` // what could not be removed
}

// GC removes what sandboxes whose owning msb died left behind: their init
// (and so every process in them), cgroups and state dirs. Sandboxes of live
// owners, in this process or another, are untouched: their owner lock is held.
func (rt *Runtime) GC() GCReport {
	var rep GCReport
	ents, err := os.ReadDir(rt.stateDir)
	if err != nil {
		rep.Errors = append(rep.Errors, err.Error())
		return rep
	}
	dead := map[string]bool{}
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "kept-") {
			continue
		}
		dir := filepath.Join(rt.stateDir, name)
		lock, ok := tryLock(dir)
		if !ok {
			continue
		}
		dead[name] = true
		if pid := rt.killInit(dir); pid > 0 {
			rep.Processes = append(rep.Processes, pid)
		}
		if err := RemoveAll(dir); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		} else {
			rep.Sandboxes = append(rep.Sandboxes, dir)
		}
		lock.Close()
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
		rep.Cgroups = append(rep.Cgroups, cgroup.RemoveStaleEmpty(rt.cg, time.Minute)...)
	}
	return rep
}

// tryLock takes the owner lock of a sandbox state dir; it succeeds only when
// the owner is gone (or never took it).
func tryLock(dir string) (*os.File, bool) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, false
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	// A sandbox being created takes the lock right after mkdir; a dir
	// younger than a second without info.json may be mid-create.
	if _, err := os.Stat(filepath.Join(dir, "info.json")); err != nil {
		if st, err := os.Stat(dir); err == nil && time.Since(st.ModTime()) < time.Second {
			f.Close()
			return nil, false
		}
	}
	return f, true
}

// killInit kills the sandbox's init if it still runs; the kernel then kills
// every process in the sandbox's PID namespace. It checks that the pid is
// still a sandbox init before killing it (pids are reused).
func (rt *Runtime) killInit(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "info.json"))
	if err != nil {
		return 0
	}
	var info stateInfo
	if json.Unmarshal(b, &info) != nil || info.InitPid <= 0 {
		return 0
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(info.InitPid) + "/cmdline")
	if err != nil || !strings.HasPrefix(string(cmdline), "msb-sandbox-init") {
		return 0
	}
	syscall.Kill(info.InitPid, syscall.SIGKILL)
	for i := 0; i < 200; i++ {
		if _, err := os.Stat("/proc/" + strconv.Itoa(info.InitPid)); err != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return info.InitPid
}
