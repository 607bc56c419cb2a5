package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/mount"
	"github.com/minisandbox/msb/internal/sandbox/sbinit"
	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// ErrResetUnsupported means a sandbox cannot be reset in place (Reset):
// the caller starts a new sandbox in its place instead. The message says
// why.
var ErrResetUnsupported = errors.New("sandbox cannot be reset in place")

// CanReset says whether Reset can put a new root under the sandbox, and
// if not, why (an ErrResetUnsupported). In root mode the new root is
// mounted in the sandbox's mount namespace by a thread of this process
// that joins it. A rootless sandbox's namespaces take joining its user
// namespace first, which a process of more than one thread (any Go
// program) cannot, and the supervisor inside cannot mount (no
// CAP_SYS_ADMIN, seccomp): util-linux's nsenter(1) joins them and runs
// this binary's reset-root stage there (putRootInNS), so a rootless reset
// needs nsenter, and a kernel from 6.15 (RootlessResetKernel). Its kernel
// allows an overlay in a user namespace: the sandbox's root is one (Reset
// checks).
func (s *Sandbox) CanReset() error {
	why := ""
	switch {
	case s.rt.rootless && !haveNsenter():
		why = "a rootless sandbox's new root is mounted by nsenter(1) in its namespaces, and there is no nsenter on PATH (as root: apt-get install util-linux)"
	case s.rt.rootless && RootlessResetKernel() != nil:
		why = RootlessResetKernel().Error()
	case s.conf.RootDir != "":
		why = "a copy-mode sandbox has no layers"
	case s.conf.UpperDir != "":
		why = "its upper dir is the caller's (Config.UpperDir)"
	case s.mountNS == nil && !s.rt.rootless:
		why = "msb holds no descriptor of its mount namespace"
	case s.conn == nil || !s.Alive():
		return fmt.Errorf("%w: sandbox %s is not running", ErrClosed, s.ID)
	}
	if why != "" {
		return fmt.Errorf("%w: %s", ErrResetUnsupported, why)
	}
	return nil
}

// Reset puts the sandbox, in place, on d.Layers (bottom first) with
// d.Owners and an empty writable layer: every process but its supervisor
// is killed and its sessions closed; the old writable layer (/tmp among
// it, where the sandbox has a disk) and /dev/shm are emptied; a new
// overlay over the layers becomes the root, under the mounts the sandbox
// had (host dirs, binds, /proc, /sys, /dev, /etc/hosts), which are moved
// onto it. What stays is everything but the
// files: the id, the supervisor (init's pid), the namespaces (network:
// its interfaces, addresses and policy; mount, PID, UTS: the host name),
// the cgroups with their limits and counters, the disk and its limit
// (the new writable layer is on the same disk, the old one removed before
// Reset returns; rootless, a new disk tmpfs of the same size that holds
// /dev/shm too: see putRootInNS), the control socket and the config but its layers and
// owners. Processes started and file operations meanwhile wait for the
// reset; a call in flight sees the sandbox before or after it, or fails
// as its process is killed.
//
// It fails with ErrResetUnsupported (see CanReset), changing nothing, or
// with what went wrong; a reset that fails after its processes were
// killed may leave the sandbox without its files: close it then.
func (s *Sandbox) Reset(ctx context.Context, d Deferred) error {
	_, err := s.ResetKeeping(ctx, d, "")
	return err
}

// ResetKeeping is Reset, but the shell of session keep lives on in the
// new root when it ran no command and holds nothing of the old root's
// files (a host base's shell: its binary, libraries, terminal and pipes
// are on the host's dirs and /dev, which the reset moves, and its root
// and working directory "/", which pivot_root moves): kept reports
// whether it did. Such a session serves one opened after the reset
// (AdoptSession) without a shell's start. Otherwise it is closed as the
// others are.
func (s *Sandbox) ResetKeeping(ctx context.Context, d Deferred, keep string) (kept bool, err error) {
	if err := s.CanReset(); err != nil {
		return false, err
	}
	if err := s.checkResetLayers(d); err != nil {
		return false, err
	}
	shifted := s.shiftedFor(ctx, d) // before the kill: it may build a layer
	p, err := s.beginReset(ctx, keep)
	if err != nil {
		return false, err
	}
	return p.finish(d, shifted)
}

// PendingReset is a reset begun (BeginReset) and not yet finished: the
// sandbox's processes are ended, and it waits for its new layers.
type PendingReset struct {
	s             *Sandbox
	upper         string   // the writable layer's dir
	points, flags []string // rootMounts'
	chans         []string // the kept shell's pipes
	kept          bool
	over          bool // finished or aborted
}

// BeginReset is the first half of ResetKeeping, the part that needs no
// layers: the sandbox's processes are ended (all but keep's shell, as
// ResetKeeping keeps it) and until Finish or Abort, one of which must be
// called, no process starts and no file operation runs in it. A fork
// begins its spare's reset while it copies its parent's files, and
// finishes it onto them (docs/engine.md). It fails as ResetKeeping does
// before it kills anything.
func (s *Sandbox) BeginReset(ctx context.Context, keep string) (*PendingReset, error) {
	if err := s.CanReset(); err != nil {
		return nil, err
	}
	return s.beginReset(ctx, keep)
}

// Finish puts the sandbox on d.Layers with d.Owners as ResetKeeping
// does, and reports whether the shell kept lives on. Layers the sandbox
// cannot take fail it as Abort does.
func (p *PendingReset) Finish(ctx context.Context, d Deferred) (kept bool, err error) {
	if p.over {
		return false, fmt.Errorf("resetting sandbox %s: the reset is over", p.s.ID)
	}
	if err := p.s.checkResetLayers(d); err != nil {
		return false, errors.Join(err, p.Abort())
	}
	return p.finish(d, p.s.shiftedFor(ctx, d))
}

// Abort ends the reset without a new root: the sandbox has its old one,
// without the processes BeginReset ended; the caller closes it.
func (p *PendingReset) Abort() error {
	if p.over {
		return nil
	}
	p.over = true
	return p.s.resetDone()
}

// checkResetLayers checks that the sandbox can be put on d's layers.
func (s *Sandbox) checkResetLayers(d Deferred) error {
	next := s.Config()
	next.Layers, next.Owners = d.mountPaths(), d.Owners // checked where they are now
	return next.validateRoot()
}

// shiftedFor is d's layers and owners as the sandbox mounts them
// (rootless with an image's user: shifted; see shifted).
func (s *Sandbox) shiftedFor(ctx context.Context, d Deferred) Deferred {
	lowers, owners := s.shifted(ctx, d.mountPaths(), d.Owners)
	return Deferred{Layers: lowers, Owners: owners}
}

// beginReset is BeginReset once CanReset passed.
func (s *Sandbox) beginReset(ctx context.Context, keep string) (*PendingReset, error) {
	upper, err := s.WritableDir()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrResetUnsupported, err)
	}
	points, flags, err := rootMounts(s.InitPid()) // no process can mount: the same after the kill
	if err != nil {
		return nil, err
	}
	resp, err := s.conn.call(ctx, &wire.Request{Op: wire.OpReset, Session: keep})
	if err != nil {
		s.resetDone()
		return nil, fmt.Errorf("resetting sandbox %s: ending its processes: %w", s.ID, err)
	}
	p := &PendingReset{s: s, upper: upper, points: points, flags: flags}
	if len(resp.Data) > 0 {
		p.chans, p.kept = strings.Split(string(resp.Data), "\n"), true
	}
	return p, nil
}

// finish is Finish with d checked and shifted (shiftedFor).
func (p *PendingReset) finish(d, shifted Deferred) (kept bool, err error) {
	s := p.s
	p.over = true
	old, err := s.putRoot(filepath.Dir(p.upper), shifted, newRoot{points: p.points, links: s.hostLinks(), owners: wireOwners(shifted.Owners), chans: p.chans}, p.flags)
	if err != nil {
		err = fmt.Errorf("resetting sandbox %s: %w", s.ID, err)
	}
	// Removed while the old overlay is still mounted (detached, unused):
	// its unmount then has no dirty data of the old layer to write back.
	if old != "" {
		err = errors.Join(err, RemoveAll(old))
	}
	if err == nil {
		err = s.dropHostRoot() // a restored sandbox's, mounted on the host
	}
	err = errors.Join(err, s.resetDone())
	if err != nil {
		return false, err
	}
	s.confMu.Lock()
	s.conf.Layers, s.conf.Owners = d.Layers, d.Owners
	s.confMu.Unlock()
	return p.kept, nil
}

// SetLayers records where the sandbox's layers are (Config.Layers), one
// path for each of those it has, after a Reset whose Deferred gave them
// where they are mounted from alone (a fork's early tree, whose layer is
// named once hashed: docs/engine.md).
func (s *Sandbox) SetLayers(paths []string) error {
	s.confMu.Lock()
	defer s.confMu.Unlock()
	if len(paths) != len(s.conf.Layers) {
		return invalid("setting %d layers of a sandbox that has %d", len(paths), len(s.conf.Layers))
	}
	s.conf.Layers = slices.Clone(paths)
	return nil
}

// AdoptSession opens session name as OpenSession does, with the shell of
// session from where it can serve (it ran no command, and nothing bash
// reads at its start differs: session.Session.Adopt), without a shell's
// start, and reports whether it did; from is gone either way.
func (s *Sandbox) AdoptSession(ctx context.Context, name, from string, opts SessionOptions) (adopted bool, err error) {
	resp, err := s.call(ctx, &wire.Request{Op: wire.OpSessionOpen, Session: name, From: from, Env: opts.Env, Dir: opts.Dir})
	return err == nil && resp.Exit == 1, err
}

// resetDone has the supervisor take up its root, new or not, and start
// processes again: after every OpReset, whatever the caller's context.
func (s *Sandbox) resetDone() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.conn.call(ctx, &wire.Request{Op: wire.OpResetDone}); err != nil {
		return fmt.Errorf("resetting sandbox %s: taking up the new root: %w", s.ID, err)
	}
	return nil
}

// putRoot makes the new root of a reset, an overlay of d.Layers (with the
// old one's flags) and r, and pivots the sandbox into it. The writable
// layer's dirs in parent (the upper dir's, on the host) move aside into
// old, which the caller removes; new empty ones take their names.
func (s *Sandbox) putRoot(parent string, d Deferred, r newRoot, flags []string) (old string, err error) {
	old = filepath.Join(parent, "reset-"+newID())
	if err := os.Mkdir(old, 0o700); err != nil {
		return "", fmt.Errorf("making room for the old writable layer: %w", err)
	}
	for _, n := range []string{"upper", "work"} {
		if err := os.Rename(filepath.Join(parent, n), filepath.Join(old, n)); err != nil {
			return old, fmt.Errorf("moving the old %s dir aside: %w", n, err)
		}
		if err := os.Mkdir(filepath.Join(parent, n), 0o755); err != nil {
			return old, fmt.Errorf("making a new %s dir: %w", n, err)
		}
	}
	lowers := d.Layers
	if len(lowers) == 0 {
		lowers = []string{s.rt.empty} // as init's config has it
	}
	if s.rt.rootless {
		return old, s.putRootInNS(lowers, parent, old, r, flags)
	}
	ov, err := newOverlay(lowers, filepath.Join(parent, "upper"), filepath.Join(parent, "work"), flags)
	if err != nil {
		return old, err
	}
	defer unix.Close(ov)
	return old, s.swapRoot(ov, r)
}

// newRoot is what a reset puts on the new overlay besides its layers.
type newRoot struct {
	points []string // mount points of the mounts moved from the old root
	// replace are detached mounts that take the place of the old root's
	// at the same point (not moved): a rootless reset's new scratch dirs.
	replace map[string]int
	links   [][2]string  // host dirs that are symlinks on the host: path, target
	owners  []wire.Owner // Config.Owners
	chans   []string     // a kept shell's pipes in wire.SessionDir, left there
}

// hostLinks are the host dirs of a host-base sandbox that are symlinks on
// the host (a merged /usr's /bin): init made them as symlinks in the root
// (not mounts), so a new root needs them made again.
func (s *Sandbox) hostLinks() [][2]string {
	if !s.conf.HostBase {
		return nil
	}
	dirs := s.conf.HostDirs
	if len(dirs) == 0 {
		dirs = DefaultHostDirs
	}
	var links [][2]string
	for _, d := range dirs {
		if link, err := os.Readlink(d); err == nil {
			links = append(links, [2]string{d, link})
		}
	}
	return links
}

// rootMounts reads the mounts of init's namespace: the points of the
// ones on the root (each carries what is mounted below it), and the root
// overlay's flags that a new one repeats (volatile, userxattr). A root
// that is not an overlay, or a mount stacked on one of the root's (moving
// the path would move the top one alone), is ErrResetUnsupported.
func rootMounts(initPid int) ([]string, []string, error) {
	all, err := mount.ReadMountinfo("/proc/" + strconv.Itoa(initPid) + "/mountinfo")
	if err != nil {
		return nil, nil, fmt.Errorf("reading the sandbox's mounts: %w", err)
	}
	root := -1
	for i, m := range all {
		if m.Point == "/" {
			root = i // the last one: on top of any other at "/"
		}
	}
	if root < 0 || all[root].FSType != "overlay" {
		return nil, nil, fmt.Errorf("%w: its root is not an overlay", ErrResetUnsupported)
	}
	var on []string
	points := map[int]string{}
	for _, m := range all {
		if m.Parent == all[root].ID && m.ID != all[root].ID {
			on = append(on, m.Point)
			points[m.ID] = m.Point
		}
	}
	for _, m := range all {
		if p, ok := points[m.Parent]; ok && p == m.Point {
			return nil, nil, fmt.Errorf("%w: two mounts at %s", ErrResetUnsupported, m.Point)
		}
	}
	return on, overlayFlags(all[root].Super), nil
}

// overlayFlags are the options of a root overlay (as mountinfo shows
// them) that a reset's new overlay repeats: volatile, which kernels from
// 6.15 show as fsync=volatile, and userxattr.
func overlayFlags(super []string) []string {
	var flags []string
	for _, o := range super {
		switch o {
		case "volatile", "fsync=volatile":
			flags = append(flags, "volatile")
		case "userxattr":
			flags = append(flags, o)
		}
	}
	return flags
}

// newOverlay makes a detached overlay mount (fsopen, fsmount) of layers
// (bottom first) with upper and work, plus flags, and returns its
// descriptor. Its directories are named as /proc/self/fd/N of this
// process, resolved here, in the host's namespace: the overlay's options,
// which the sandbox reads in its mountinfo, show none of the host's paths,
// as init's do.
func newOverlay(layers []string, upper, work string, flags []string) (int, error) {
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	byFD := func(dir string) (string, error) {
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", fmt.Errorf("opening overlay dir %s: %w", dir, err)
		}
		fds = append(fds, fd)
		return "/proc/self/fd/" + strconv.Itoa(fd), nil
	}
	opts := mount.OverlayOptions{Lowers: make([]string, len(layers))}
	var err error
	for i, l := range layers {
		if opts.Lowers[i], err = byFD(l); err != nil {
			return -1, err
		}
	}
	if opts.Upper, err = byFD(upper); err != nil {
		return -1, err
	}
	if opts.Work, err = byFD(work); err != nil {
		return -1, err
	}
	m, err := mount.Overlay("(new root)", opts)
	if err != nil {
		return -1, err
	}
	mfd, err := mount.Detached("overlay", append(strings.Split(m.Data, ","), flags...), 0)
	if err != nil {
		return -1, fmt.Errorf("the new root overlay of %d layers (%s): %w", len(layers), strings.Join(layers, ":"), err)
	}
	return mfd, nil
}

// swapRoot makes the detached overlay ov the sandbox's root, on the
// mount thread (onMountThread) joined to the sandbox's mount namespace.
func (s *Sandbox) swapRoot(ov int, r newRoot) error {
	ns := int(s.mountNS.Fd())
	return onMountThread(func() error { return swapRootHere(ns, ov, r) })
}

// mountThread is one OS thread of this process with a filesystem context
// of its own (unshare CLONE_FS), which lets it join other mount
// namespaces (setns), for the jobs of onMountThread. It never exits: the
// exit of a thread sends the parent-death signal to the processes it
// forked, which may be sandboxes' inits (Pdeathsig), and the thread
// locked for it may have been one that forked them.
var mountThread struct {
	once sync.Once
	jobs chan func()
	err  error // why there is none
}

// onMountThread runs f on the mount thread and returns its error; after
// f the thread goes back to this process's mount namespace, so that it
// holds no sandbox's mounts.
func onMountThread(f func() error) error {
	mt := &mountThread
	mt.once.Do(func() {
		mt.jobs = make(chan func())
		ready := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // for good
			home, err := os.Open("/proc/thread-self/ns/mnt")
			if err == nil {
				if err = unix.Unshare(unix.CLONE_FS); err != nil {
					err = fmt.Errorf("unsharing the mount thread's filesystem context: %w", err)
				}
			}
			ready <- err
			if err != nil {
				select {} // parked: the thread must not exit
			}
			for job := range mt.jobs {
				job()
				// Should this fail, the next job's setns moves the thread
				// on; until then it keeps the sandbox's namespace alive.
				unix.Setns(int(home.Fd()), unix.CLONE_NEWNS)
			}
		}()
		mt.err = <-ready
	})
	if mt.err != nil {
		return mt.err
	}
	done := make(chan error, 1)
	mt.jobs <- func() { done <- f() }
	return <-done
}

// scratch are the sandbox's mounts, or directories of its mounts, whose
// contents a reset empties in place: /dev/shm (a tmpfs, or a dir of the
// sandbox's disk), the sessions' pipes and, where it is a mount (a tmpfs:
// the sandbox has no disk), /tmp. With a disk /tmp is a directory of the
// root, and the new root has the layers' /tmp, as a new container would.
var scratch = []string{"/dev/shm", wire.SessionDir, "/tmp"}

// swapRootHere does swapRoot's work on the calling thread, the mount
// thread, which it moves into the mount namespace ns: the scratch dirs
// emptied, ov attached at a new dir of the old root, each mount on the
// old root moved to the same place on ov (its mount point made there as
// init makes one), the host dirs' symlinks made, owners given, and then
// ov pivoted to the root: the kernel moves every process whose root or
// working directory was the old root (the supervisor) to it, and the old
// root is detached.
func swapRootHere(ns, ov int, r newRoot) error {
	if err := unix.Setns(ns, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("joining the sandbox's mount namespace: %w", err)
	}
	for _, d := range scratch {
		if d == "/tmp" && !slices.Contains(r.points, d) {
			continue // the old root's, removed with its upper dir
		}
		var keep []string
		if d == wire.SessionDir {
			keep = r.chans
		}
		if err := emptyDir(d, keep...); err != nil {
			return err
		}
	}
	at := "/.msb-reset-" + newID()
	if err := unix.Mkdir(at, 0o700); err != nil {
		return fmt.Errorf("making %s in the old root: %w", at, err)
	}
	dfd, err := unix.Open(at, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", at, err)
	}
	err = unix.MoveMount(ov, "", dfd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
	unix.Close(dfd)
	if err != nil {
		return fmt.Errorf("attaching the new root overlay at %s: %w", at, err)
	}
	for _, p := range r.points {
		from := unix.AT_FDCWD // the mount at p itself
		if fd, ok := r.replace[p]; ok {
			from = fd
		}
		if err := moveOnto(at, p, from); err != nil {
			return err
		}
	}
	for p, fd := range r.replace {
		if slices.Contains(r.points, p) {
			continue
		}
		// Below a mount moved with it (/dev/shm in /dev): the old one
		// there is detached, the new one put in its place.
		if err := unix.Unmount(at+p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil {
			return fmt.Errorf("detaching the old mount at %s: %w", p, err)
		}
		if err := moveOnto(at, p, fd); err != nil {
			return err
		}
	}
	if err := sbinit.TmpDirIn(at); err != nil {
		return err
	}
	for _, l := range r.links {
		if err := symlinkIn(at, l[0], l[1]); err != nil {
			return err
		}
	}
	if err := sbinit.GiveOwnersIn(at, r.owners); err != nil {
		return err
	}
	if err := unix.Fchdir(ov); err != nil {
		return fmt.Errorf("entering the new root: %w", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root into the new root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the old root: %w", err)
	}
	return nil
}

// moveOnto moves a mount to point under root, making its mount point
// there: a directory, or a file where a file is mounted. The mount is
// from, a detached one, or with from AT_FDCWD the mount at point, with
// what is mounted below it; a mount at point that is not moved stays on
// the old root, to be detached with it.
func moveOnto(root, point string, from int) error {
	what, path, flags, statFlags := "the mount at "+point, point, 0, 0
	if from != unix.AT_FDCWD {
		what, path, flags, statFlags = "the new mount for "+point, "", unix.MOVE_MOUNT_F_EMPTY_PATH, unix.AT_EMPTY_PATH
	}
	var st unix.Stat_t
	if err := unix.Fstatat(from, path, &st, statFlags); err != nil {
		return fmt.Errorf("looking at %s: %w", what, err)
	}
	fd, err := sbinit.MountPointIn(root, point, st.Mode&unix.S_IFMT == unix.S_IFDIR)
	if err != nil {
		return fmt.Errorf("making the mount point %s in the new root: %w", point, err)
	}
	defer unix.Close(fd)
	if err := unix.MoveMount(from, path, fd, "", flags|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("moving %s to the new root: %w", what, err)
	}
	return nil
}

// symlinkIn makes p (absolute, under root) a symlink to target, unless
// p exists.
func symlinkIn(root, p, target string) error {
	var dfd int
	var err error
	if parent := filepath.Dir(p); parent == "/" {
		dfd, err = unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	} else {
		dfd, err = sbinit.MountPointIn(root, parent, true)
	}
	if err != nil {
		return fmt.Errorf("making the parent of %s in the new root: %w", p, err)
	}
	defer unix.Close(dfd)
	err = unix.Symlinkat(target, dfd, filepath.Base(p))
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("making the host symlink %s -> %s in the new root: %w", p, target, err)
	}
	return nil
}

// emptyDir removes what is in dir, if it exists, but the entries named
// keep. dir must be a directory
// itself, not a symlink: the sandbox's user can replace the sessions' dir
// with a link to a host dir it has bound writable, whose files this
// process, root on the host, would remove where the user could not. No
// process of the sandbox runs meanwhile (Reset killed them), so what
// Lstat sees is what ReadDir opens; RemoveAll follows no link below it.
func emptyDir(dir string, keep ...string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err == nil && !fi.IsDir() {
		err = fmt.Errorf("it is a %s, not a directory", fileKind(fi.Mode()))
	}
	if err != nil {
		return fmt.Errorf("emptying %s: %w", dir, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("emptying %s: %w", dir, err)
	}
	for _, e := range ents {
		if slices.Contains(keep, e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("emptying %s: %w", dir, err)
		}
	}
	return nil
}

// fileKind names a file's type for an error: "symlink", "regular file".
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "symlink"
	case m.IsRegular():
		return "regular file"
	}
	return "special file"
}
