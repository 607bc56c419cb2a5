package sbinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/minisandbox/msb/internal/mount"
	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// devices are bound from the host's /dev into the sandbox's /dev.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// procMasks hide /proc files that describe or control the host kernel.
var procMasks = []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sysrq-trigger", "/proc/kmsg"}

// procReadOnly are /proc trees made read-only.
var procReadOnly = []string{"/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs"}

// buildRoot mounts the sandbox's root filesystem at cfg.Root: the part
// BuildAhead makes, unless the host made it (cfg.RootAhead), then /proc
// and /sys, which take init's PID and network namespaces, the caller's
// binds and the masks.
func buildRoot(cfg *wire.Config) error {
	if cfg.HostIdmap {
		defer unix.Close(wire.IdmapFd)
	}
	if !cfg.RootAhead {
		if err := BuildAhead(cfg, wire.IdmapFd, -1); err != nil {
			return err
		}
	}
	r := cfg.Root
	if err := mountProc(r); err != nil {
		return err
	}
	if err := mountSys(r, cfg); err != nil {
		return err
	}
	for _, b := range cfg.Binds {
		if err := bind(r, b); err != nil {
			return err
		}
	}
	for _, m := range cfg.Masks {
		if err := mask(r, m); err != nil {
			return err
		}
	}
	return nil
}

// BuildAhead makes the mount namespace of the caller's thread private and
// mounts there the part of the sandbox's root at cfg.Root that depends on
// no other namespace of init's: the disk and the root overlay (or the
// copy-mode bind), the host dirs (through the idmap user namespace idmap
// when cfg.HostIdmap), /dev, /tmp and /etc/hosts. Init does it (buildRoot),
// or, beside init's runtime start, a thread of the host joined to init's
// mount namespace, where init is root in the host's user namespace and
// the disk a volume of the pool (no descriptor of init's to hand on:
// cfg.Disk.Fd stays 0). disk, when not -1, is a detached mount of that
// volume (a clone of the host's mount of the pool, open_tree(2)), attached
// at cfg.Disk.Mount instead of a mount of the pool's device.
func BuildAhead(cfg *wire.Config, idmap, disk int) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	if err := mountRoot(cfg, disk); err != nil {
		return err
	}
	r := cfg.Root
	if !cfg.HostIdmap {
		idmap = -1
	}
	for _, d := range cfg.HostDirs {
		if err := hostDir(r, d, idmap, cfg.Masks); err != nil {
			return err
		}
	}
	if err := mountDev(r, cfg); err != nil {
		return err
	}
	if err := makeTmp(r, cfg); err != nil {
		return err
	}
	return hostsFile(r, cfg)
}

// mountRoot mounts the overlay of the layers at cfg.Root, or binds the
// copy-mode root dir there (disk: see BuildAhead).
func mountRoot(cfg *wire.Config, disk int) error {
	if cfg.Disk != nil {
		if err := mountDisk(cfg, disk); err != nil {
			return err
		}
	}
	if cfg.RootBind != "" {
		if err := (mount.Mount{Source: cfg.RootBind, Target: cfg.Root, Flags: unix.MS_BIND | unix.MS_REC}).Mount(); err != nil {
			return fmt.Errorf("binding copy-mode root: %w", err)
		}
		return nil
	}
	return mountOverlayByFD(cfg)
}

// mountOverlayByFD mounts the root overlay with each of its directories
// named /proc/self/fd/N, a descriptor of init's held for the call. The
// overlay's options are what every process of the sandbox reads in
// /proc/self/mountinfo; named so, they show none of the host's paths (the
// cache's, the state dir's), and stay far from the kernel's one-page limit.
func mountOverlayByFD(cfg *wire.Config) error {
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	byFD := func(dir string) (string, error) {
		if dir == "" {
			return "", nil
		}
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", fmt.Errorf("opening overlay dir %s: %w", dir, err)
		}
		fds = append(fds, fd)
		return "/proc/self/fd/" + strconv.Itoa(fd), nil
	}
	// An upper dir on the sandbox's disk goes with the sandbox: nothing of
	// it need ever reach the disk's filesystem (see mountOverlay).
	opts := mount.OverlayOptions{Lowers: make([]string, len(cfg.Lowers)), UserXattr: cfg.UserXattr, Volatile: cfg.Disk != nil}
	var err error
	for i, l := range cfg.Lowers {
		if opts.Lowers[i], err = byFD(l); err != nil {
			return err
		}
	}
	if opts.Upper, err = byFD(cfg.Upper); err != nil {
		return err
	}
	if opts.Work, err = byFD(cfg.Work); err != nil {
		return err
	}
	if err := mountOverlay(cfg.Root, opts); err != nil {
		return fmt.Errorf("mounting root overlay of %d layers (%s): %w", len(cfg.Lowers), strings.Join(cfg.Lowers, ":"), err)
	}
	return nil
}

// mountOverlay mounts the overlay of opts at root. Volatile (an upper dir
// on the sandbox's disk, deleted with the sandbox) spares the sandbox's
// teardown a sync of the disk's filesystem when the overlay is unmounted
// with the sandbox's mount namespace: on the disk pool, a btrfs transaction
// commit and a flush of the pool's loop device, the largest part of the
// teardown. A kernel without overlayfs's volatile (before 5.10) refuses
// the option (EINVAL), and the overlay is mounted without it.
func mountOverlay(root string, opts mount.OverlayOptions) error {
	ov, err := mount.Overlay(root, opts)
	if err != nil {
		return err
	}
	err = ov.Mount()
	if opts.Volatile && errors.Is(err, unix.EINVAL) {
		opts.Volatile = false
		return mountOverlay(root, opts)
	}
	return err
}

// mountDisk mounts the filesystem that holds the writable layer: the
// sandbox's volume of the runtime's pool, or a tmpfs in which it makes the
// upper and work dirs. Either way it makes there the dir that /dev/shm is
// (see ScratchDirs), which then shares its limit with the root (/tmp
// among it: see makeTmp). A volume is mounted from the pool's device, or
// is disk, a detached mount of it, when that is not -1: the kernel then
// neither opens the device nor reads its superblock, as a mount by device
// does (a third of a millisecond).
func mountDisk(cfg *wire.Config, disk int) error {
	d := cfg.Disk
	if d.Device != "" {
		var err error
		if disk >= 0 {
			err = attach(disk, d.Mount)
		} else {
			err = (mount.Mount{Source: d.Device, Target: d.Mount, FSType: "btrfs", Flags: unix.MS_NOATIME, Data: "subvol=" + d.Subvol}).Mount()
		}
		if err != nil {
			return fmt.Errorf("mounting the sandbox's disk volume: %w", err)
		}
	} else if err := mount.Tmpfs(d.Mount, 0, tmpfsData(cfg, "755", d.TmpfsBytes)).Mount(); err != nil {
		return fmt.Errorf("mounting the sandbox's disk tmpfs: %w", err)
	}
	fd, err := unix.Open(d.Mount, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the sandbox's disk: %w", err)
	}
	if err := MakeDiskDirs(fd, d.Device == ""); err != nil {
		unix.Close(fd)
		return err
	}
	if d.Device != "" {
		unix.Close(fd)
		return nil
	}
	// The tmpfs is mounted in this namespace only: the host reaches the
	// upper dir in it through this descriptor (see wire.Disk.Fd).
	d.Fd = fd
	return nil
}

// attach attaches the detached mount mnt at target.
func attach(mnt int, target string) error {
	fd, err := unix.Open(target, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.MoveMount(mnt, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
}

// ScratchDir is a directory Name of the sandbox's disk, bound at Target
// inside the sandbox when it has one.
type ScratchDir struct {
	Name, Target string
	Mode         uint32 // as chmod(2) takes it: os.Chmod would drop 0o1000
}

// ScratchDirs are the sandbox's mounts that are directories of its disk:
// /dev/shm, a mount of its own as in a container. A rootless reset makes
// them in its new disk tmpfs as init does.
var ScratchDirs = []ScratchDir{{"shm", "/dev/shm", 0o1777}}

// LayerDirs are the dirs of the writable layer on a sandbox's disk: the
// overlay's upper and work dirs.
var LayerDirs = []ScratchDir{{"upper", "", 0o755}, {"work", "", 0o755}}

// MakeDiskDirs makes in the root of a sandbox's disk, the dir dirfd, what
// every sandbox's disk holds: with layer, LayerDirs (a volume of the pool
// has them from the host), then ScratchDirs. Init makes them in the disk
// it mounts, the host in a restored sandbox's and a rootless reset's new
// one.
func MakeDiskDirs(dirfd int, layer bool) error {
	dirs := ScratchDirs
	if layer {
		dirs = append(slices.Clone(LayerDirs), ScratchDirs...)
	}
	for _, d := range dirs {
		err := unix.Mkdirat(dirfd, d.Name, d.Mode)
		if err == nil {
			err = unix.Fchmodat(dirfd, d.Name, d.Mode, 0) // past the umask
		}
		if err != nil {
			return fmt.Errorf("making the %s dir of the sandbox's disk: %w", d.Name, err)
		}
	}
	return nil
}

// makeTmp makes the sandbox's /tmp. With a disk it is a directory of the
// root, as in a container (its writes in the overlay's upper dir, within
// the disk limit): a file renamed from /tmp to elsewhere in the root moves
// (rename(2) gives no EXDEV), and a snapshot keeps it. It is the layers'
// /tmp as they have it (a symlink stays one), else made, mode 1777. A
// sandbox without a disk (its writable tree a host directory: environment
// builds, copy mode) has a tmpfs of cfg.TmpBytes there, so that no build's
// layer holds what it left in /tmp, and a host directory none of it.
func makeTmp(root string, cfg *wire.Config) error {
	if cfg.Disk == nil {
		return mountScratch(root, cfg, "/tmp", cfg.TmpBytes)
	}
	return TmpDirIn(root)
}

// TmpDirIn makes /tmp in root, mode 1777, unless root has one: a reset's
// new root, whose layers may hold none (the old one's was in its upper
// dir), is given it as init gives it (makeTmp).
func TmpDirIn(root string) error {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the root to make /tmp: %w", err)
	}
	defer unix.Close(rfd)
	err = unix.Mkdirat(rfd, "tmp", 0o1777) // mkdir follows no symlink
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	if err == nil {
		err = unix.Fchmodat(rfd, "tmp", 0o1777, 0) // past the umask
	}
	if err != nil {
		return fmt.Errorf("making /tmp in the root: %w", err)
	}
	return nil
}

// mountScratch mounts the sandbox's target (/tmp or /dev/shm) inside root:
// a bind of its dir of the sandbox's disk, nosuid and nodev, or else a
// tmpfs of size.
func mountScratch(root string, cfg *wire.Config, target string, size int64) error {
	if cfg.Disk == nil {
		return mkdirMount(mount.Tmpfs(filepath.Join(root, target), unix.MS_NOSUID|unix.MS_NODEV, tmpfsData(cfg, "1777", size)))
	}
	for _, d := range ScratchDirs {
		if d.Target != target {
			continue
		}
		src := filepath.Join(cfg.Disk.Mount, d.Name)
		if err := bindIn(root, src, target, true, false); err != nil {
			return fmt.Errorf("binding the sandbox's disk dir %s at %s: %w", src, target, err)
		}
		flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
		if cfg.Disk.Device != "" {
			flags |= unix.MS_NOATIME // as the volume is mounted
		}
		fd, err := resolveIn(root, target)
		if err != nil {
			return fmt.Errorf("bind target %s after mount: %w", target, err)
		}
		defer unix.Close(fd)
		if err := (mount.Mount{Target: fdPath(fd), Flags: flags}).Mount(); err != nil {
			return fmt.Errorf("making %s nosuid and nodev: %w", target, err)
		}
		return nil
	}
	return fmt.Errorf("no disk dir for %s", target)
}

// tmpfsData is the mount data of a tmpfs of the sandbox with mode and
// size. Where the sandbox's memory limit must bound its files and no cgroup
// charges kernel memory to it (cfg.LimitInodes), the number of inodes is
// bounded too: empty files take no pages, so size alone would let a flood of
// them take kernel memory without end. One inode per 8 KiB of size keeps
// their memory (about 1 KiB each) within an eighth of it.
func tmpfsData(cfg *wire.Config, mode string, size int64) string {
	data := "mode=" + mode + ",size=" + strconv.FormatInt(size, 10)
	if cfg.LimitInodes {
		data += ",nr_inodes=" + strconv.FormatInt(max(size/(8<<10), 1024), 10)
	}
	return data
}

// hostDir binds host directory d read-only at the same path, or recreates
// it as a symlink when it is one on the host (merged /usr). With an idmap
// user namespace (idmap >= 0) the bind goes through it; without, a d that
// holds masks (absolute paths) is an overlay hiding them (overlayHidden),
// or, where overlayfs refuses d as a layer, a bind whose masks buildRoot
// mounts over the files (mask), as behind the idmap.
func hostDir(root, d string, idmap int, masks []string) error {
	fi, err := os.Lstat(d)
	if err != nil {
		return nil // not on this host; the host side already chose the list
	}
	target := filepath.Join(root, d)
	if fi.Mode()&os.ModeSymlink != 0 {
		link, err := os.Readlink(d)
		if err != nil {
			return fmt.Errorf("reading host symlink %s: %w", d, err)
		}
		if _, err := os.Lstat(target); err == nil {
			return nil
		}
		if err := os.Symlink(link, target); err != nil {
			return fmt.Errorf("recreating host symlink %s -> %s in sandbox: %w", d, link, err)
		}
		return nil
	}
	if idmap >= 0 {
		return bindIdmapped(root, d, idmap)
	}
	if hidden := masksUnder(d, masks); len(hidden) > 0 {
		err := overlayHidden(root, d, hidden)
		if err == nil {
			return nil
		}
		if berr := bindIn(root, d, d, true, true); berr != nil {
			return fmt.Errorf("%w; binding host dir %s instead (with its masks mounted over the files): %w", err, d, berr)
		}
		return nil
	}
	return bindIn(root, d, d, true, true)
}

// masksUnder returns the masks below host dir d, relative to it.
func masksUnder(d string, masks []string) []string {
	var rel []string
	for _, m := range masks {
		if r, ok := strings.CutPrefix(filepath.Clean(m), filepath.Clean(d)+"/"); ok {
			rel = append(rel, r)
		}
	}
	return rel
}

// overlayHidden gives the sandbox host dir d read-only without the paths
// hidden (relative to d): an overlay whose upper lower layer, a tmpfs
// made for it, holds a whiteout for each; what is mounted below d on the
// host is bound over it again (bindSubmounts), as the plain and idmapped
// binds of a host dir are recursive. A sandbox that reads the host dirs as
// root depends on these masks, and a mask mounted over the host's file
// (mask) does not hold: the host replaces /etc/shadow and /etc/gshadow by
// rename (passwd, useradd), which detaches every mount on the old file in
// every namespace, so the sandbox would see the new one. A whiteout is a
// lookup in the overlay's own layer, which no rename on the host changes.
//
// On error nothing of it is left mounted: the caller binds d instead.
// overlayfs refuses some dirs as a layer: one already at the kernel's
// stacking depth (an overlay of an overlay), one on a filesystem it calls
// unsupported (case-insensitive names, automount points).
func overlayHidden(root, d string, hidden []string) error {
	target, err := resolveCreate(root, d, true)
	if err != nil {
		return fmt.Errorf("host dir target %s: %w", d, err)
	}
	defer unix.Close(target)
	layer, err := whiteoutLayer(hidden)
	if err != nil {
		return fmt.Errorf("the layer hiding %s's secrets: %w", d, err)
	}
	defer unix.Close(layer)
	// Before Linux 6.15 overlayfs takes no layer from a mount attached to
	// no mount namespace (EINVAL: "failed to clone lowerpath"), so the
	// layer is attached, at the target, while the overlay is made; the
	// overlay keeps a private clone of it, and it is detached again.
	if err := unix.MoveMount(layer, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("attaching the layer hiding %s's secrets: %w", d, err)
	}
	ov, err := overlayFs(fdPath(layer) + ":" + overlayEscape(d))
	if uerr := unix.Unmount(fdPath(layer), unix.MNT_DETACH); uerr != nil {
		if err == nil {
			unix.Close(ov)
		}
		return fmt.Errorf("detaching the layer hiding %s's secrets: %w", d, uerr)
	}
	if err != nil {
		return fmt.Errorf("overlay of host dir %s without %s: %w", d, strings.Join(hidden, ", "), err)
	}
	defer unix.Close(ov)
	if err := unix.MoveMount(ov, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("mounting the overlay of host dir %s in the sandbox: %w", d, err)
	}
	if err := bindSubmounts(root, d, hidden); err != nil {
		unix.Unmount(fdPath(ov), unix.MNT_DETACH) // with what it bound below
		return err
	}
	return nil
}

// overlayFs makes a read-only overlay of the layers lowers (as its
// lowerdir option takes them), not attached anywhere yet, and returns its
// mount's descriptor.
func overlayFs(lowers string) (int, error) {
	return mount.Detached("overlay", []string{"lowerdir=" + lowers}, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
}

// whiteoutLayer makes a tmpfs attached nowhere holding a whiteout (a
// character device 0:0) at each path of hidden, and returns a descriptor
// of its root.
func whiteoutLayer(hidden []string) (int, error) {
	mnt, err := mount.Detached("tmpfs", []string{"mode=0755"}, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return -1, err
	}
	for _, h := range hidden {
		parent, name := filepath.Split(h)
		if parent != "" {
			if err := mkdirAllIn(mnt, parent); err != nil {
				unix.Close(mnt)
				return -1, err
			}
		}
		if err := unix.Mknodat(mnt, filepath.Join(parent, name), unix.S_IFCHR|0o000, 0); err != nil {
			unix.Close(mnt)
			return -1, fmt.Errorf("whiteout %s: %w", h, err)
		}
	}
	return mnt, nil
}

// bindSubmounts binds what is mounted below host dir d (in this mount
// namespace, a copy of the host's) read-only at the same paths inside
// root, each outermost mount with what is mounted below it, except at or
// below a hidden path (relative to d): an overlay shows its layers' own
// files, not what is mounted on them (a container's /etc/resolv.conf).
func bindSubmounts(root, d string, hidden []string) error {
	// This thread's: a test's may have a mount namespace of its own.
	infos, err := mount.ReadMountinfo("/proc/thread-self/mountinfo")
	if err != nil {
		return err
	}
	prefix := filepath.Clean(d) + "/"
	var points []string
	for _, m := range infos {
		rel, ok := strings.CutPrefix(m.Point, prefix)
		if !ok || underAny(rel, hidden) || underAny(rel, relTo(points, prefix)) {
			continue
		}
		points = append(points, m.Point)
	}
	for _, p := range points {
		if err := bindSubmount(root, p); err != nil {
			return err
		}
	}
	return nil
}

// bindSubmount binds host mount point p (with what is mounted below it)
// read-only, nosuid and nodev at the same path inside root.
func bindSubmount(root, p string) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("cloning host mount %s: %w", p, err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		return fmt.Errorf("making host mount %s read-only: %w", p, err)
	}
	target, err := resolveIn(root, p) // in the overlay already: a read-only dir
	if err != nil {
		return fmt.Errorf("bind target %s: %w", p, err)
	}
	defer unix.Close(target)
	if err := unix.MoveMount(fd, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("mounting host mount %s in the sandbox: %w", p, err)
	}
	return nil
}

// underAny reports whether relative path p is one of dirs or below one.
func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// relTo returns paths with prefix cut off.
func relTo(paths []string, prefix string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = strings.TrimPrefix(p, prefix)
	}
	return out
}

// overlayEscape escapes the characters overlayfs's lowerdir option splits
// on (',' between options, ':' between layers) and its escape, '\'.
func overlayEscape(p string) string {
	return strings.NewReplacer(`\`, `\\`, ",", `\,`, ":", `\:`).Replace(p)
}

// bindIdmapped binds host dir d (with what is mounted below it) read-only
// at the same path inside root, through an idmapped mount whose user
// namespace maps none of the host's ids. Every file then belongs, as far as
// the kernel's checks go, to an id without a mapping: no capability
// overrides its permissions (CAP_DAC_OVERRIDE needs a mapped owner), so even
// the sandbox's root reads only what the permissions give everyone, as an
// unprivileged user would.
func bindIdmapped(root, d string, userns int) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, d, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("cloning host dir %s: %w", d, err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(userns),
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		return fmt.Errorf("idmapping host dir %s: %w", d, err)
	}
	target, err := resolveCreate(root, d, true)
	if err != nil {
		return fmt.Errorf("bind target %s: %w", d, err)
	}
	defer unix.Close(target)
	if err := unix.MoveMount(fd, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("mounting host dir %s in the sandbox: %w", d, err)
	}
	return nil
}

func mkdirMount(m mount.Mount) error {
	if err := os.MkdirAll(m.Target, 0o755); err != nil {
		return fmt.Errorf("creating mount point %s: %w", m.Target, err)
	}
	return m.Mount()
}

func mountProc(root string) error {
	p := mount.Mount{Source: "proc", Target: filepath.Join(root, "proc"), FSType: "proc", Flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC}
	if err := mkdirMount(p); err != nil {
		return err
	}
	for _, m := range procReadOnly {
		t := filepath.Join(root, m)
		if _, err := os.Stat(t); err != nil {
			continue
		}
		if err := mount.Apply(mount.Bind(t, t, true)); err != nil {
			return err
		}
	}
	for _, m := range procMasks {
		if err := mask(root, m); err != nil {
			return err
		}
	}
	return nil
}

func mountDev(root string, cfg *wire.Config) error {
	dev := filepath.Join(root, "dev")
	if err := mkdirMount(mount.Tmpfs(dev, unix.MS_NOSUID|unix.MS_NOEXEC, tmpfsData(cfg, "755", 64<<10))); err != nil {
		return err
	}
	for _, d := range devices {
		t := filepath.Join(dev, d)
		if err := touch(t); err != nil {
			return err
		}
		if err := (mount.Mount{Source: "/dev/" + d, Target: t, Flags: unix.MS_BIND}).Mount(); err != nil {
			return err
		}
	}
	pts := mount.Mount{Source: "devpts", Target: filepath.Join(dev, "pts"), FSType: "devpts",
		Flags: unix.MS_NOSUID | unix.MS_NOEXEC, Data: "newinstance,ptmxmode=0666,mode=0620"}
	if err := mkdirMount(pts); err != nil {
		return err
	}
	if err := mountScratch(root, cfg, "/dev/shm", cfg.ShmBytes); err != nil {
		return err
	}
	// Sessions' named pipes: in the sandbox's own /dev, not in /tmp, which
	// commands clean up.
	sessions := filepath.Join(root, wire.SessionDir)
	if err := os.Mkdir(sessions, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", wire.SessionDir, err)
	}
	if err := os.Chown(sessions, cfg.UID, cfg.GID); err != nil {
		return fmt.Errorf("handing %s to the sandbox user: %w", wire.SessionDir, err)
	}
	for name, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return fmt.Errorf("creating /dev/%s: %w", name, err)
		}
	}
	return nil
}

func touch(p string) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("creating mount point %s: %w", p, err)
	}
	return f.Close()
}

// bind mounts b.Source at b.Target inside root; the target is resolved
// within root so a symlink in a layer cannot send the mount elsewhere.
func bind(root string, b wire.Bind) error {
	fi, err := os.Stat(b.Source)
	if err != nil {
		return fmt.Errorf("bind source %s: %w", b.Source, err)
	}
	return bindIn(root, b.Source, b.Target, fi.IsDir(), b.ReadOnly)
}

// bindIn binds src at target inside root. The target is resolved within
// root (a symlink in a layer cannot send the mount elsewhere) and the mount
// goes through the resolved descriptor, so nothing can swap the path
// between resolution and mount; the read-only remount resolves again to
// reach the new mount's root.
func bindIn(root, src, target string, dir, readOnly bool) error {
	fd, err := resolveCreate(root, target, dir)
	if err != nil {
		return fmt.Errorf("bind target %s: %w", target, err)
	}
	ms := mount.Bind(src, fdPath(fd), readOnly)
	err = ms[0].Mount()
	unix.Close(fd)
	if err != nil || !readOnly {
		return err
	}
	fd, err = resolveIn(root, target)
	if err != nil {
		return fmt.Errorf("bind target %s after mount: %w", target, err)
	}
	defer unix.Close(fd)
	ms[1].Target = fdPath(fd)
	return ms[1].Mount()
}

func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// resolveIn opens p (absolute, relative to root) as an O_PATH descriptor,
// following symlinks as if root were "/".
func resolveIn(root, p string) (int, error) {
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(rootFd)
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	return unix.Openat2(rootFd, p, &how)
}

// mask hides path (inside root) behind /dev/null, or an empty read-only
// tmpfs for a directory.
//
// The host's files it masks (/etc/gshadow) are replaced by rename when
// the host changes them (useradd, groupadd): a rename between the mount's
// lookup of its target and its lock of it fails the mount with ENOENT,
// though the path never stopped existing. The mount is then tried again
// on the new file, up to maskTries times.
func mask(root, p string) error {
	t := filepath.Join(root, p)
	for i := 1; ; i++ {
		fi, err := os.Stat(t)
		if err != nil {
			return nil
		}
		m := mount.Mount{Source: "/dev/null", Target: t, Flags: unix.MS_BIND}
		if fi.IsDir() {
			m = mount.Tmpfs(t, unix.MS_RDONLY, "size=0")
		}
		err = m.Mount()
		if err == nil || !errors.Is(err, unix.ENOENT) {
			return err
		}
		if i == maskTries {
			return fmt.Errorf("%w (the file was replaced during each of %d tries)", err, maskTries)
		}
	}
}

// maskTries bounds mask's tries of a file replaced meanwhile.
const maskTries = 100

// resolveCreate resolves p under root, following symlinks as if root were
// "/", creating missing directories (and, when !dir, the final file), and
// returns an O_PATH descriptor of the result.
func resolveCreate(root, p string, dir bool) (int, error) {
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(rootFd)
	parent, base := filepath.Split(filepath.Clean("/" + p))
	if err := mkdirAllIn(rootFd, parent); err != nil {
		return -1, err
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	pfd, err := unix.Openat2(rootFd, parent, &how)
	if err != nil {
		return -1, fmt.Errorf("resolving %s: %w", parent, err)
	}
	defer unix.Close(pfd)
	if dir {
		if err := unix.Mkdirat(pfd, base, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, err
		}
	} else if fd, err := unix.Openat2(pfd, base, &how); err == nil {
		return fd, nil // an existing file, maybe on a read-only tree (the host's /etc)
	} else if fd, err := unix.Openat(pfd, base, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o644); err == nil {
		unix.Close(fd)
	} else if !errors.Is(err, unix.EISDIR) {
		return -1, err
	}
	return unix.Openat2(pfd, base, &how)
}

// mkdirAllIn creates dir (absolute, relative to rootFd) component by
// component, resolving each within the root.
func mkdirAllIn(rootFd int, dir string) error {
	cur := "/"
	for _, c := range splitPath(dir) {
		next := filepath.Join(cur, c)
		how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
		fd, err := unix.Openat2(rootFd, cur, &how)
		if err != nil {
			return fmt.Errorf("resolving %s: %w", cur, err)
		}
		err = unix.Mkdirat(fd, c, 0o755)
		unix.Close(fd)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("creating %s: %w", next, err)
		}
		cur = next
	}
	return nil
}

func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(filepath.Clean("/"+p), "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// pivot makes root the process's root and detaches the old one.
func pivot(root string) error {
	if err := unix.Chdir(root); err != nil {
		return fmt.Errorf("chdir %s: %w", root, err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root %s: %w", root, err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching old root: %w", err)
	}
	return unix.Chdir("/")
}

// loopbackUp brings up lo in the sandbox's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket for loopback: %w", err)
	}
	defer unix.Close(fd)
	return setUp(fd, "lo")
}
