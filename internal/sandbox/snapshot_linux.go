package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/cgroup"
	"golang.org/x/sys/unix"
)

// ErrNoWritableDir means the sandbox's writable layer cannot be read from
// the host: its disk tmpfs is mounted only in its own mount namespace and
// its init, which holds the one way there, is gone, or a copy-mode sandbox
// has no layer of its own.
var ErrNoWritableDir = errors.New("sandbox's writable layer is not reachable from the host")

// Config is the configuration the sandbox was created with (a copy), with
// the layers and owners of its last Reset: a sandbox made from it, with
// layers added on top, is a fork. It holds no Session: the sessions a
// fork opens are its caller's to say.
func (s *Sandbox) Config() Config {
	s.confMu.Lock()
	c := s.conf
	s.confMu.Unlock()
	c.Layers = slices.Clone(c.Layers)
	c.HostDirs = slices.Clone(c.HostDirs)
	c.Binds = slices.Clone(c.Binds)
	c.Env = slices.Clone(c.Env)
	c.Stdio, c.Session = nil, nil
	return c
}

// Hostname is the sandbox's host name: Config.Hostname, or by default
// "msb-" and the first 8 characters of its id. A sandbox that replaces it
// in place (an engine's rollback) is given it, so the name stays.
func (s *Sandbox) Hostname() string {
	if s.conf.Hostname != "" {
		return s.conf.Hostname
	}
	return "msb-" + s.ID[:8]
}

// WritableDir is the host path of the sandbox's overlay upper dir: the
// caller's or private host directory, or the upper dir in the sandbox's
// volume of the disk pool (a path that means something in this process
// only), or in its disk tmpfs through init's descriptor of it (a path
// valid while init lives) or, after a rootless reset, through this
// process's descriptor of the reset's (valid until the sandbox is
// closed). It is ErrNoWritableDir otherwise.
func (s *Sandbox) WritableDir() (string, error) {
	switch {
	case s.upper != "":
		return s.upper, nil
	case s.volume != nil:
		return filepath.Join(s.volume.Path(), "upper"), nil
	case s.resetDiskDir() != "":
		return s.resetDiskDir() + "/upper", nil
	case s.diskFd > 0 && s.Alive():
		// The disk tmpfs is mounted in init's namespace only; init's
		// descriptor of it leads there.
		return fmt.Sprintf("/proc/%d/fd/%d/upper", s.InitPid(), s.diskFd), nil
	case s.conf.RootDir != "":
		return "", fmt.Errorf("%w: a copy-mode sandbox writes into its root dir", ErrNoWritableDir)
	}
	return "", fmt.Errorf("%w: its upper dir is on a tmpfs mounted in the sandbox's namespace only, and init holds no descriptor of it", ErrNoWritableDir)
}

// Freeze stops every process of the sandbox until thaw is called, which
// must be done on every path, also after an error: it freezes the
// sandbox's cgroup (see cgroup.Group.Freeze) or, without one or its
// freezer (rootless), stops its processes (see stopAll).
func (s *Sandbox) Freeze(ctx context.Context) (thaw func() error, err error) {
	if s.cg == nil {
		return s.stopAll(ctx)
	}
	thaw = s.cg.Thaw
	err = s.cg.Freeze(ctx)
	if errors.Is(err, cgroup.ErrNoFreezer) {
		return s.stopAll(ctx) // a delegated v1 group without the freezer
	}
	if err != nil {
		return thaw, fmt.Errorf("freezing sandbox %s: %w", s.ID, err)
	}
	return thaw, nil
}

// stopAll stops init and every process descended from it (which, in a
// PID namespace, is every process of the sandbox: orphans go to its init)
// with SIGSTOP, parents before children, scanning again until a scan
// finds no process it has not stopped; the set is then closed, as a
// stopped process cannot fork. thaw continues them, children first (a
// parent sees no stopped child), but not those that were stopped already.
func (s *Sandbox) stopAll(ctx context.Context) (thaw func() error, err error) {
	var stopped []proc // in stop order
	seen := map[proc]bool{}
	thaw = func() error {
		var errs []error
		for _, p := range slices.Backward(stopped) {
			if err := p.signal(unix.SIGCONT); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	for {
		var fresh []proc
		for _, p := range descendants(s.InitPid()) {
			if !seen[p] {
				seen[p] = true
				fresh = append(fresh, p)
			}
		}
		if len(fresh) == 0 {
			return thaw, nil
		}
		for _, p := range fresh {
			if state(p) == 'T' {
				continue // stopped by the sandbox's own job control: left so
			}
			if err := p.signal(unix.SIGSTOP); err != nil {
				return thaw, fmt.Errorf("stopping process %d of sandbox %s: %w", p.pid, s.ID, err)
			}
			stopped = append(stopped, p)
		}
		for _, p := range fresh {
			if err := awaitStop(ctx, p); err != nil {
				return thaw, fmt.Errorf("stopping process %d of sandbox %s: %w", p.pid, s.ID, err)
			}
		}
	}
}

// proc names one process for the life of the host: its pid and start
// time (clock ticks after boot), so that a reused pid is not taken for it.
type proc struct {
	pid   int
	start uint64
}

// statFields are the fields of /proc/PID/stat after the command's name:
// state is [0], ppid [1], starttime [19].
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	st := string(b)
	f := strings.Fields(st[strings.LastIndexByte(st, ')')+1:])
	if len(f) < 20 {
		return nil
	}
	return f
}

// state is the process's state letter ('T' stopped, 't' traced), 0 when
// it is gone or is another process now.
func state(p proc) byte {
	f := statFields(p.pid)
	if f == nil {
		return 0
	}
	if start, _ := strconv.ParseUint(f[19], 10, 64); start != p.start {
		return 0
	}
	return f[0][0]
}

// signal sends sig to p unless p is gone; a gone process is no error.
func (p proc) signal(sig unix.Signal) error {
	if state(p) == 0 {
		return nil
	}
	if err := unix.Kill(p.pid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}

// awaitStop waits until p is stopped or gone, looking every stopPoll (a
// nanosleep of the thread: the runtime's timers make a wait this short a
// millisecond).
func awaitStop(ctx context.Context, p proc) error {
	for {
		switch state(p) {
		case 'T', 't', 0, 'Z', 'X':
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		unix.Nanosleep(&unix.Timespec{Nsec: int64(stopPoll)}, nil)
	}
}

const stopPoll = 50 * time.Microsecond

// descendants lists root and the processes below it, parents first.
func descendants(root int) []proc {
	children := map[int][]proc{}
	var top proc
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := statFields(pid)
		if f == nil {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		start, _ := strconv.ParseUint(f[19], 10, 64)
		p := proc{pid: pid, start: start}
		if pid == root {
			top = p
		}
		children[ppid] = append(children[ppid], p)
	}
	if top.pid == 0 {
		return nil
	}
	out := []proc{top}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i].pid]...)
	}
	return out
}
