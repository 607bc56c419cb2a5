package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/mount"
	"github.com/minisandbox/msb/internal/sandbox/sbinit"
	"golang.org/x/sys/unix"
)

// RestoreTarget is what Runtime.Restore made for a sandbox whose processes
// are restored from a dump rather than started: the restorer (package
// checkpoint, which sits above this one and knows CRIU; this package knows
// no dump) starts them over it.
type RestoreTarget struct {
	// ID is the new sandbox's; its cgroups are named by it, as a created
	// sandbox's are.
	ID string
	// Root is the new sandbox's root, mounted on the host: an overlay of
	// Config.Layers and its own upper dir (on its disk).
	Root string
	// Disk is the host path of the root of its disk (the filesystem
	// holding its upper dir), "" when it has none (a host upper dir).
	// Shm is the dir of it to bind at /dev/shm, "" with no disk.
	Disk, Shm string
	// Cgroups are the dirs of its cgroups (Config.Limits set), made before
	// the restore: one on cgroup v2, one per controller on v1.
	Cgroups []string
	// Idmap is the runtime's user namespace of idmapped host dirs (nil:
	// none), which a restore binds them through again.
	Idmap *os.File
	// Netns is the network namespace of a sandbox without a network
	// (nil: on the host's), set up as a created one's (loopback, eth0:
	// see netNow), for a dump that left its own out.
	Netns *os.File
	// Control is the restored supervisor's end of its control socket,
	// made in Netns (or the host's): the Sandbox holds the other end.
	Control *os.File
}

// Restorer starts a dump's processes over t and returns its init, which
// must be a child of this process (the Sandbox waits for it).
type Restorer func(ctx context.Context, t RestoreTarget) (init *os.Process, err error)

// Restore makes a sandbox whose processes come from a dump of another
// (restore, package checkpoint) instead of a new init: its state dir,
// disk (upper, work and shm dirs), cgroups with cfg's limits and root
// overlay are made as Create makes them, but on the host (the restored
// mount namespace binds the root: it is not made inside by init), and a
// sandbox without a network gets a namespace as a create's (netNow) with
// its control socketpair made in it; then restore starts the processes
// over them. The result is an ordinary Sandbox: Exec, sessions (the
// dumped sandbox's sessions go on in it), Snapshot, a dump of its
// processes, Reset and Close work on it, gc knows it by its info.json,
// and its close unmounts the root and disk it has on the host. Root mode only;
// cfg has layers (the dumped sandbox's, with the layer of its writes taken
// with the dump on top: processes reopen their files there) and no copy
// mode, caller's upper dir, filtered network, stdio or session of its own.
// On error nothing is left behind.
func (rt *Runtime) Restore(ctx context.Context, cfg Config, restore Restorer) (*Sandbox, error) {
	if rt.closed.Load() {
		return nil, ErrRuntimeClosed
	}
	if err := cfg.Validate(rt.rootless); err != nil {
		return nil, err
	}
	switch {
	case rt.rootless:
		return nil, invalid("restoring a sandbox's processes needs root (CRIU suspends their seccomp filter, which needs CAP_SYS_ADMIN)")
	case cfg.RootDir != "" || cfg.UpperDir != "" || cfg.KeepUpper:
		return nil, invalid("a restored sandbox's writable layer is its own: no RootDir, UpperDir or KeepUpper")
	case cfg.Network == NetworkFiltered:
		return nil, invalid("a sandbox on a filtered network is not restored (its forwarder is a process of msb's, outside the dump)")
	case cfg.Stdio != nil || cfg.Session != nil:
		return nil, invalid("a restored sandbox has the dumped one's stdio and sessions: no Stdio or Session of its own")
	}
	s := &Sandbox{ID: newID(), rt: rt, conf: cfg, cleaned: make(chan struct{}), restored: true}
	s.log = rt.log.With("sandbox", s.ID)
	start := time.Now()
	if err := s.restore(ctx, restore); err != nil {
		s.teardown()
		return nil, fmt.Errorf("restoring sandbox %s: %w", s.ID, err)
	}
	s.times.since(PhaseCreate, start)
	s.log.Debug("sandbox restored", "init_pid", s.cmd.Process.Pid, "took", time.Since(start))
	return s, nil
}

func (s *Sandbox) restore(ctx context.Context, restore Restorer) error {
	if err := s.prepareDirs(); err != nil {
		return err
	}
	limits := s.conf.Limits.withDefaults()
	if err := s.rt.checkCgroupLimits(limits); err != nil {
		return err
	}
	t := RestoreTarget{ID: s.ID, Root: filepath.Join(s.dir, restoredMounts[0])}
	// The disk as a create makes it (a volume of the pool with its layer
	// dirs, or a tmpfs's size), mounted on the host, in the state dir,
	// where init mounts it inside: CRIU binds from the host.
	disk, err := s.prepareDisk(limits)
	if err != nil {
		return err
	}
	if disk != nil {
		t.Disk = filepath.Join(s.dir, restoredMounts[1])
		if err := os.Mkdir(t.Disk, 0o755); err != nil {
			return err
		}
		if disk.Device != "" {
			// The pool's volumes are reached through a descriptor of
			// this process's, which CRIU cannot bind from.
			fd := s.volumeMount()
			if fd < 0 {
				return errors.New("no mount of the sandbox's volume of the disk pool")
			}
			err = attachAt(fd, t.Disk)
			unix.Close(fd)
			if err != nil {
				return fmt.Errorf("mounting the sandbox's volume at %s: %w", t.Disk, err)
			}
		} else if err := mount.Tmpfs(t.Disk, unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("mode=755,size=%d", disk.TmpfsBytes)).Mount(); err != nil {
			return fmt.Errorf("mounting the sandbox's disk tmpfs: %w", err)
		}
		s.hostMounts = append(s.hostMounts, t.Disk)
		dfd, err := unix.Open(t.Disk, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening the sandbox's disk: %w", err)
		}
		err = sbinit.MakeDiskDirs(dfd, disk.Device == "")
		unix.Close(dfd)
		if err != nil {
			return err
		}
		s.upper, s.work = filepath.Join(t.Disk, "upper"), filepath.Join(t.Disk, "work")
		t.Shm = filepath.Join(t.Disk, sbinit.ScratchDirs[0].Name)
	}
	if err := s.makeCgroup(limits); err != nil {
		return err
	}
	if s.cg != nil {
		t.Cgroups = s.cg.Dirs()
	}
	if err := os.Mkdir(t.Root, 0o755); err != nil {
		return err
	}
	lowers := slices.Clone(s.conf.Layers)
	if len(lowers) == 0 || s.conf.HostBase {
		// The mount points of a host-base root (the host dirs, /proc,
		// /dev...), which the restore mounts on and init made nowhere.
		lowers = append([]string{s.rt.empty}, lowers...)
	}
	ov, err := mount.Overlay(t.Root, mount.OverlayOptions{Lowers: lowers, Upper: s.upper, Work: s.work, Volatile: t.Disk != ""})
	if err == nil {
		err = ov.Mount()
	}
	if err != nil {
		return fmt.Errorf("mounting the restored sandbox's root: %w", err)
	}
	s.hostMounts = append(s.hostMounts, t.Root)
	if s.conf.HostBase && !s.conf.HostReadAsRoot {
		t.Idmap, _ = s.rt.idmap()
	}
	// The control socketpair: made in the sandbox's network namespace, as
	// a created sandbox's made ahead is, so that it can be dumped again.
	var net *readyNet
	if s.conf.Network == "" || s.conf.Network == NetworkNone {
		if net, err = s.rt.netNow(sandboxIface()); err != nil {
			return fmt.Errorf("the restored sandbox's network namespace: %w", err)
		}
		defer net.close()
		t.Netns = net.ns
		s.tap, net.tap = net.tap, nil
	}
	host, control, err := controlPair(net, "ctl-restored")
	if err != nil {
		return err
	}
	t.Control = control
	p, err := restore(ctx, t)
	t.Control.Close()
	if err != nil {
		host.Close()
		s.reapHalfRestored()
		return err
	}
	s.cmd = &exec.Cmd{Process: p}
	s.waitDone = make(chan struct{})
	go func() {
		st, _ := p.Wait()
		s.cmd.ProcessState = st
		close(s.waitDone)
	}()
	s.holdMounts()
	s.writeInfo()
	s.conn = newConn(host, s.deathNote)
	s.adoptExecs(ctx) // before any other request: the restored execs' IDs
	return nil
}

// reapHalfRestored kills and reaps what a failed restore left of the
// sandbox's processes. CRIU makes the restored init a child of this
// process (--restore-sibling), which nothing waits for when the restore
// fails: killed (with the cgroup, or by criu itself), it would stay a
// zombie child of msb. Such a task is in a PID namespace below this
// one's, and is named criu or, once criu restored it that far, as the
// dumped task was (a sandbox's init, as any other sandbox's is). Those
// in this sandbox's cgroup before the kill (a zombie's cgroup cannot be
// read) are waited for until they are gone; a zombie named criu (one of
// a concurrent failed restore's too, which no one waits for either) is
// reaped; a live one outside the cgroup, maybe another restore's, is
// left alone, as are the other sandboxes' inits, which their Sandbox
// waits for.
func (s *Sandbox) reapHalfRestored() {
	ours := map[int]bool{}
	if s.cg != nil {
		for _, c := range halfRestored() {
			if !c.zombie && s.inOwnCgroup(c.pid) {
				ours[c.pid] = true
			}
		}
		s.cg.Kill()
	}
	for deadline := time.Now().Add(halfRestoredWait); ; time.Sleep(5 * time.Millisecond) {
		live := false
		for _, c := range halfRestored() {
			switch {
			case c.zombie && (ours[c.pid] || c.name == "criu"):
				unix.Wait4(c.pid, nil, unix.WNOHANG, nil)
			case ours[c.pid]:
				live = true
			}
		}
		if !live || time.Now().After(deadline) {
			break
		}
	}
	reapStrayZombies()
}

// strayZombieAge is how long a zombie child in a PID namespace below
// this process's stays one before reapStrayZombies takes it for no one's.
const strayZombieAge = time.Second

// reapStrayZombies reaps this process's zombie children in PID namespaces
// below its own that stay zombies for strayZombieAge. A sandbox's init is
// such a child, and its Sandbox reaps it as it exits (a wait blocked in
// the kernel); one still a zombie a second on is what a failed restore
// left once criu had given it the dumped task's name, which nothing
// waits for. It returns once none is left, or after twice that age.
func reapStrayZombies() {
	seen := map[int]time.Time{}
	for deadline := time.Now().Add(2 * strayZombieAge); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		zombies := 0
		for _, c := range halfRestored() {
			if !c.zombie {
				continue
			}
			zombies++
			first, ok := seen[c.pid]
			switch {
			case !ok:
				seen[c.pid] = time.Now()
			case time.Since(first) >= strayZombieAge:
				unix.Wait4(c.pid, nil, unix.WNOHANG, nil)
			}
		}
		if zombies == 0 {
			return
		}
	}
}

// halfRestoredWait bounds reapHalfRestored's wait for the killed
// processes of the sandbox's cgroup to exit.
const halfRestoredWait = 5 * time.Second

// halfRestoredTask is a child of this process in a PID namespace below
// its own, as a restore's init is.
type halfRestoredTask struct {
	pid    int
	name   string
	zombie bool
}

// halfRestored lists this process's children in PID namespaces below
// its own.
func halfRestored() []halfRestoredTask {
	self := strconv.Itoa(os.Getpid())
	var out []halfRestoredTask
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		var name, state, ppid string
		var levels int
		for l := range strings.SplitSeq(string(b), "\n") {
			k, v, _ := strings.Cut(l, ":")
			v = strings.TrimSpace(v)
			switch k {
			case "Name":
				name = v
			case "State":
				state = v
			case "PPid":
				ppid = v
			case "NSpid":
				levels = len(strings.Fields(v))
			}
		}
		if ppid == self && levels > 1 {
			out = append(out, halfRestoredTask{pid: pid, name: name, zombie: strings.HasPrefix(state, "Z")})
		}
	}
	return out
}

// inOwnCgroup says whether live process pid is in the sandbox's cgroup,
// or one below it.
func (s *Sandbox) inOwnCgroup(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		_, path, _ := strings.Cut(l, ":")
		_, path, _ = strings.Cut(path, ":")
		if slices.Contains(strings.Split(path, "/"), s.ID) {
			return true
		}
	}
	return false
}

// unmountHost unmounts what a restored sandbox mounted on the host (its
// root, then its disk tmpfs), once its processes are gone.
func (s *Sandbox) unmountHost() error {
	var errs []error
	for _, p := range slices.Backward(s.hostMounts) {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	s.hostMounts = nil
	return errors.Join(errs...)
}

// dropHostRoot unmounts a restored sandbox's old root from the host once
// a reset put a new one in its mount namespace (the restore bound the
// host's mount as its root; the reset's overlay is mounted inside only,
// as a created sandbox's is). Its disk stays: the new upper dir is on it.
func (s *Sandbox) dropHostRoot() error {
	if !s.restored {
		return nil
	}
	root := filepath.Join(s.dir, restoredMounts[0])
	i := slices.Index(s.hostMounts, root)
	if i < 0 {
		return nil
	}
	if err := unix.Unmount(root, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmounting the restored root %s after the reset: %w", root, err)
	}
	s.hostMounts = slices.Delete(s.hostMounts, i, i+1)
	return nil
}

// DiskPath is the host path of the root of the sandbox's disk (the
// filesystem of its upper dir): its volume of the disk pool, or a restored
// sandbox's disk tmpfs; "" otherwise (a host upper dir, or a tmpfs only its
// mount namespace shows).
func (s *Sandbox) DiskPath() string {
	switch {
	case s.restored && s.upper != "" && !s.ownUpper:
		return filepath.Dir(s.upper)
	case s.volume != nil:
		return ownPath(s.volume.Path())
	}
	return ""
}

// FreezerDir is the dir of the cgroup that Freeze freezes, "" when Freeze
// stops the processes one by one instead (no cgroup, or no freezer): what
// a dump of a frozen sandbox names to CRIU (package checkpoint).
func (s *Sandbox) FreezerDir() string {
	if s.cg == nil {
		return ""
	}
	return s.cg.FreezerDir()
}

// ownPath is p, a path of this process's (/proc/self/...: a volume of the
// disk pool), as another process (criu) reaches it.
func ownPath(p string) string {
	if rest, ok := strings.CutPrefix(p, "/proc/self/"); ok {
		return "/proc/" + strconv.Itoa(os.Getpid()) + "/" + rest
	}
	return p
}

// attachAt attaches the detached mount mnt at the dir target.
func attachAt(mnt int, target string) error {
	return unix.MoveMount(mnt, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH)
}

// restoredMounts are the mounts a restored sandbox has on the host, in
// its state dir, in the order they come off (see Runtime.Restore): no
// created sandbox's state dir has dirs of these names.
var restoredMounts = []string{"root", "disk"}

// unmountRestored unmounts what a restored sandbox whose msb died left
// mounted in its state dir dir, before GC removes the dir (which would
// otherwise empty the disk through the mount and fail on the mount
// points).
func unmountRestored(dir string) error {
	var errs []error
	for _, m := range restoredMounts {
		p := filepath.Join(dir, m)
		err := unix.Unmount(p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
