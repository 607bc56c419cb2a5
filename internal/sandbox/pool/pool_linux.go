package pool

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrUnavailable means no pool can be made or mounted on this host; the
// message says what is missing.
var ErrUnavailable = errors.New("disk pool unavailable")

// ErrBusy means a pool was not released: sandboxes of live processes
// still have volumes in it.
var ErrBusy = errors.New("disk pool in use")

// MinSize is the smallest pool worth making.
const MinSize = 256 << 20

// The names in a pool directory and in its filesystem (see the package
// comment).
const (
	lockName   = "lock"
	imageName  = "image"
	mntName    = "mnt"
	ownersName = ".owners"
)

// btrfsMagic is BTRFS_SUPER_MAGIC, statfs's f_type of a btrfs filesystem.
const btrfsMagic = 0x9123683e

// Options configure Open.
type Options struct {
	// Dir is the pool directory, on the filesystem that is to hold the
	// pool's data; made (root only, mode 0700) when missing.
	Dir string
	// Size is the size in bytes of a pool made now; 0 takes nine tenths of
	// the space free in Dir. An existing pool keeps its size.
	Size int64
}

// Pool is an open pool: descriptors of its mounted filesystem.
type Pool struct {
	dir    string
	device string // /dev/loopN, which a sandbox's init mounts
	rootFd int    // the filesystem's root directory, for ioctls
	owners int    // its .owners directory

	mu     sync.Mutex // guards closed
	closed bool
}

// Open opens the pool in opts.Dir, making it the first time and mounting
// it again when it is not mounted (after a reboot). It needs root, a
// btrfs-capable kernel, loop devices and, to make a pool, mkfs.btrfs
// (btrfs-progs). Processes that open one pool at once are safe: the one
// that makes or mounts it holds the pool's lock, the others wait for it.
func Open(opts Options) (*Pool, error) {
	if err := ensureDir(opts.Dir); err != nil {
		return nil, err
	}
	if p, err := openMounted(opts.Dir); err == nil {
		return p, nil
	}
	unlock, err := lockDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if p, err := openMounted(opts.Dir); err == nil {
		return p, nil // made or mounted while this process waited
	}
	if err := setUp(opts); err != nil {
		return nil, err
	}
	return openMounted(opts.Dir)
}

// Exists reports whether dir holds a pool (mounted or not): GC opens only
// pools that exist, never making one.
func Exists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, imageName))
	return err == nil
}

// ensureDir makes the pool directory, or checks that the one there is a
// directory of root's that no one else can write into: what is mounted
// there is trusted.
func ensureDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%w: creating pool dir: %v", ErrUnavailable, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != 0 || st.Mode&0o022 != 0 {
		return fmt.Errorf("%w: %s must be a directory of root's that no one else can write into", ErrUnavailable, dir)
	}
	return nil
}

// lockDir takes the pool's lock, waiting for another process that holds it.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: locking %s: %v", ErrUnavailable, f.Name(), err)
	}
	return func() { f.Close() }, nil
}

// openMounted opens the pool mounted in dir; it fails when none is, or
// when the one there was not finished (no .owners, made last).
func openMounted(dir string) (*Pool, error) {
	mnt := filepath.Join(dir, mntName)
	root, err := unix.Open(mnt, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", mnt, err)
	}
	p := &Pool{dir: dir, rootFd: root, owners: -1}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(root, &fs); err != nil || fs.Type != btrfsMagic {
		p.Close()
		return nil, fmt.Errorf("no pool mounted at %s", mnt)
	}
	if fs.Flags&unix.ST_RDONLY != 0 {
		p.Close()
		return nil, fmt.Errorf("%w: the pool at %s is read-only (btrfs stops writing after an I/O error: is the disk of %s full?); "+
			"unmount it (umount %s) to have it mounted again", ErrUnavailable, mnt, dir, mnt)
	}
	if p.owners, err = unix.Openat(root, ownersName, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
		p.Close()
		return nil, fmt.Errorf("the pool at %s is unfinished: %w", mnt, err)
	}
	if p.device, err = devicePath(root); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// setUp mounts the pool's image at mnt, making the image first when there
// is none. The caller holds the pool's lock. A pool left unfinished (a
// process killed while making it) is unmounted and made again.
func setUp(opts Options) error {
	mnt := filepath.Join(opts.Dir, mntName)
	if err := os.Mkdir(mnt, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	// Whatever is mounted there is not a usable pool (openMounted said so).
	for unix.Unmount(mnt, unix.MNT_DETACH) == nil {
	}
	image := filepath.Join(opts.Dir, imageName)
	if _, err := os.Stat(image); err == nil {
		return mountImage(image, mnt)
	}
	// The image gets its name once the pool in it is finished.
	tmp := image + ".new"
	if err := makeImage(tmp, opts); err != nil {
		return err
	}
	if err := mountImage(tmp, mnt); err != nil {
		return err
	}
	if err := finish(mnt); err != nil {
		unix.Unmount(mnt, unix.MNT_DETACH)
		return err
	}
	if err := os.Rename(tmp, image); err != nil {
		unix.Unmount(mnt, unix.MNT_DETACH)
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// makeImage makes a sparse image file of the pool's size holding a new
// btrfs filesystem.
func makeImage(image string, opts Options) error {
	mkfs, err := findMkfs()
	if err != nil {
		return err
	}
	size := opts.Size
	if size == 0 {
		var st unix.Statfs_t
		if err := unix.Statfs(opts.Dir, &st); err != nil {
			return fmt.Errorf("%w: free space of %s: %v", ErrUnavailable, opts.Dir, err)
		}
		size = int64(st.Bavail) * st.Bsize / 10 * 9
	}
	size &^= 1<<20 - 1
	if size < MinSize {
		return fmt.Errorf("%w: %d MiB for a pool in %s, below the %d MiB a pool needs", ErrUnavailable, size>>20, opts.Dir, MinSize>>20)
	}
	f, err := os.OpenFile(image, os.O_CREATE|os.O_TRUNC|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("%w: creating the image: %v", ErrUnavailable, err)
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		return fmt.Errorf("%w: sizing %s: %v", ErrUnavailable, image, err)
	}
	// -K: no discard of a file that is all holes; single profiles: a loop
	// file gains nothing from duplicated metadata.
	out, err := exec.Command(mkfs, "-q", "-f", "-K", "-m", "single", "-d", "single", image).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s: %v: %s", ErrUnavailable, mkfs, err, bytes.TrimSpace(out))
	}
	return nil
}

func findMkfs() (string, error) {
	if p, err := exec.LookPath("mkfs.btrfs"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/mkfs.btrfs", "/sbin/mkfs.btrfs"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: mkfs.btrfs not found (install btrfs-progs)", ErrUnavailable)
}

// mountImage attaches image to a loop device that detaches itself once the
// filesystem is unmounted, and mounts it at mnt.
func mountImage(image, mnt string) error {
	f, err := os.OpenFile(image, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer f.Close()
	// A loop device still holding the image (its filesystem was unmounted
	// here while sandboxes still mount volumes of it) is the one to mount:
	// a second device would be a second filesystem writing the same file.
	loop, device, err := findLoop(f)
	if loop == nil && err == nil {
		loop, device, err = attachLoop(f)
	}
	if err != nil {
		return err
	}
	// The mount holds the device from now on.
	defer loop.Close()
	fs, err := unix.Fsopen("btrfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("%w: fsopen btrfs: %v", ErrUnavailable, err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetString(fs, "source", device); err != nil {
		return fmt.Errorf("%w: btrfs source %s: %v", ErrUnavailable, device, err)
	}
	// Freed blocks go back to the host: the image shrinks again.
	if unix.FsconfigSetString(fs, "discard", "async") != nil {
		if err := unix.FsconfigSetFlag(fs, "discard"); err != nil {
			return fmt.Errorf("%w: btrfs discard: %v", ErrUnavailable, err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return fmt.Errorf("%w: mounting btrfs on %s: %v", ErrUnavailable, device, err)
	}
	m, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOATIME|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fmt.Errorf("%w: fsmount btrfs on %s: %v", ErrUnavailable, device, err)
	}
	defer unix.Close(m)
	if err := unix.MoveMount(m, "", unix.AT_FDCWD, mnt, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("%w: mounting %s (%s) at %s: %v", ErrUnavailable, device, image, mnt, err)
	}
	return nil
}

// findLoop opens the loop device attached to f, if there is one.
func findLoop(f *os.File) (*os.File, string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, name := range files {
		if _, err := os.Stat(name); err != nil {
			continue // not attached
		}
		dev := "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(name)))
		loop, err := os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		info, err := unix.IoctlLoopGetStatus64(int(loop.Fd()))
		if err == nil && info.Device == st.Dev && info.Inode == st.Ino {
			return loop, dev, nil
		}
		loop.Close()
	}
	return nil, "", nil
}

// attachLoop attaches f to a free loop device that detaches itself once
// nothing holds it any more.
func attachLoop(f *os.File) (*os.File, string, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer ctl.Close()
	cfg := unix.LoopConfig{Fd: uint32(f.Fd())}
	cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR | unix.LO_FLAGS_DIRECT_IO
	copy(cfg.Info.File_name[:], filepath.Base(f.Name()))
	for try := 0; ; try++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, "", fmt.Errorf("%w: finding a free loop device: %v", ErrUnavailable, err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		loop, err := os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		err = unix.IoctlLoopConfigure(int(loop.Fd()), &cfg)
		if err == nil {
			return loop, dev, nil
		}
		loop.Close()
		// Another process took the device between the two calls.
		if !errors.Is(err, unix.EBUSY) || try == 20 {
			return nil, "", fmt.Errorf("%w: attaching %s to %s: %v", ErrUnavailable, f.Name(), dev, err)
		}
	}
}

// finish turns quota groups on in a new pool (simple quotas where the
// kernel has them: cheaper) and makes .owners, which marks it finished.
func finish(mnt string) error {
	root, err := unix.Open(mnt, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer unix.Close(root)
	q := quotaCtlArgs{cmd: quotaEnableSimple}
	if ioctl(root, iocQuotaCtl, unsafe.Pointer(&q)) != nil {
		q = quotaCtlArgs{cmd: quotaEnable}
		if err := ioctl(root, iocQuotaCtl, unsafe.Pointer(&q)); err != nil {
			return fmt.Errorf("%w: enabling btrfs quota groups: %v", ErrUnavailable, err)
		}
	}
	if err := unix.Mkdirat(root, ownersName, 0o700); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// devicePath is the block device of the btrfs filesystem root is in (a
// pool has one).
func devicePath(root int) (string, error) {
	args := devInfoArgs{devid: 1}
	if err := ioctl(root, iocDevInfo, unsafe.Pointer(&args)); err != nil {
		return "", fmt.Errorf("%w: the pool's device: %v", ErrUnavailable, err)
	}
	n := bytes.IndexByte(args.path[:], 0)
	if n <= 0 {
		return "", fmt.Errorf("%w: the pool's device has no path", ErrUnavailable)
	}
	return string(args.path[:n]), nil
}

// Dir is the pool directory.
func (p *Pool) Dir() string { return p.dir }

// Device is the pool's loop device, which a sandbox's init mounts.
func (p *Pool) Device() string { return p.device }

// Stats are a pool's figures, for msb doctor.
type Stats struct {
	Size    int64 // bytes the filesystem holds
	Used    int64 // bytes in use
	Volumes int   // volumes, of live and of dead owners
}

// Stats reads the pool's figures.
func (p *Pool) Stats() (Stats, error) {
	var fs unix.Statfs_t
	if err := unix.Fstatfs(p.rootFd, &fs); err != nil {
		return Stats{}, fmt.Errorf("statfs of the pool in %s: %w", p.dir, err)
	}
	names, err := p.Volumes()
	if err != nil {
		return Stats{}, err
	}
	return Stats{Size: int64(fs.Blocks) * fs.Bsize, Used: int64(fs.Blocks-fs.Bfree) * fs.Bsize, Volumes: len(names)}, nil
}

// Close lets go of the pool's descriptors; the pool stays mounted for the
// next process, and volumes live on until they are removed.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	for _, fd := range []*int{&p.owners, &p.rootFd} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
	return nil
}

// Release removes the pool p was opened from when no live process has a
// volume in it: under the pool's lock (so no process mounts or makes it
// meanwhile), orphaned volumes are reclaimed, then the pool is closed,
// unmounted and deleted with its directory. With volumes left it is
// ErrBusy naming how many, and the pool stays as it was.
func (p *Pool) Release() error {
	unlock, err := lockDir(p.dir)
	if err != nil {
		return err
	}
	defer unlock()
	p.Reclaim()
	names, err := p.Volumes()
	if err != nil {
		return err
	}
	if len(names) > 0 {
		return fmt.Errorf("%w: %d volumes of running sandboxes", ErrBusy, len(names))
	}
	p.Close()
	return Destroy(p.dir)
}

// Destroy unmounts the pool in dir, unbinds the user namespaces kept
// there (Userns) and deletes it with the pool directory. Volumes still
// mounted in sandboxes keep the filesystem until those end; then the loop
// device detaches itself. Tests use it; on a host, Release removes a pool
// no one uses.
func Destroy(dir string) error {
	mnt := filepath.Join(dir, mntName)
	for unix.Unmount(mnt, unix.MNT_DETACH) == nil {
	}
	unbindUsernses(dir)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing the pool dir: %w", err)
	}
	return nil
}
