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
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrUnavailable means no pool can be made on this host; the message says
// what is missing.
var ErrUnavailable = errors.New("disk pool unavailable")

// BackingPrefix starts the name of every pool's backing file, followed by
// the owning process's pid and a dash: leak checks look for loop devices
// whose backing file carries it.
const BackingPrefix = "msb-disk-"

// MinSize is the smallest pool worth making.
const MinSize = 256 << 20

// Options configure New.
type Options struct {
	// Dir is a directory on the filesystem that is to hold the pool's data;
	// the backing file is made there and unlinked at once.
	Dir string
	// Size is the pool's size in bytes; 0 takes nine tenths of the space
	// free in Dir.
	Size int64
}

// Pool is a btrfs filesystem on a loop device, held by this process only.
type Pool struct {
	size    int64
	dir     string
	device  string // /dev/loopN
	loop    *os.File
	mountFd int // the detached mount
	rootFd  int // its root directory, for ioctls

	mu     sync.Mutex // guards closed
	closed bool
}

// New makes a pool. It needs root, a btrfs-capable kernel, loop devices and
// mkfs.btrfs (btrfs-progs).
func New(opts Options) (*Pool, error) {
	mkfs, err := findMkfs()
	if err != nil {
		return nil, err
	}
	size := opts.Size
	if size == 0 {
		var st unix.Statfs_t
		if err := unix.Statfs(opts.Dir, &st); err != nil {
			return nil, fmt.Errorf("%w: free space of %s: %v", ErrUnavailable, opts.Dir, err)
		}
		size = int64(st.Bavail) * st.Bsize / 10 * 9
	}
	size &^= 1<<20 - 1
	if size < MinSize {
		return nil, fmt.Errorf("%w: %d MiB for a pool in %s, below the %d MiB a pool needs", ErrUnavailable, size>>20, opts.Dir, MinSize>>20)
	}
	backing, err := os.CreateTemp(opts.Dir, BackingPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("%w: creating the backing file: %v", ErrUnavailable, err)
	}
	// The loop device holds the file from now on; its name is not needed.
	defer os.Remove(backing.Name())
	defer backing.Close()
	if err := backing.Truncate(size); err != nil {
		return nil, fmt.Errorf("%w: sizing %s: %v", ErrUnavailable, backing.Name(), err)
	}
	// -K: no discard of a file that is all holes; single profiles: a loop
	// file gains nothing from duplicated metadata.
	out, err := exec.Command(mkfs, "-q", "-f", "-K", "-m", "single", "-d", "single", backing.Name()).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v: %s", ErrUnavailable, mkfs, err, bytes.TrimSpace(out))
	}
	p := &Pool{size: size, dir: opts.Dir, mountFd: -1, rootFd: -1}
	if p.loop, p.device, err = attachLoop(backing); err != nil {
		return nil, err
	}
	if err := p.mount(); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
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
		loop, err := os.OpenFile(dev, os.O_RDWR, 0)
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

// mount makes the detached mount of the pool's filesystem and turns on
// quota groups (simple quotas where the kernel has them: cheaper).
func (p *Pool) mount() error {
	fs, err := unix.Fsopen("btrfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("%w: fsopen btrfs: %v", ErrUnavailable, err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetString(fs, "source", p.device); err != nil {
		return fmt.Errorf("%w: btrfs source %s: %v", ErrUnavailable, p.device, err)
	}
	// Freed blocks go back to the host: the backing file shrinks again.
	if unix.FsconfigSetString(fs, "discard", "async") != nil {
		if err := unix.FsconfigSetFlag(fs, "discard"); err != nil {
			return fmt.Errorf("%w: btrfs discard: %v", ErrUnavailable, err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return fmt.Errorf("%w: mounting btrfs on %s: %v", ErrUnavailable, p.device, err)
	}
	if p.mountFd, err = unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOATIME); err != nil {
		return fmt.Errorf("%w: fsmount: %v", ErrUnavailable, err)
	}
	if p.rootFd, err = unix.Openat(p.mountFd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return fmt.Errorf("opening the pool's root: %w", err)
	}
	q := quotaCtlArgs{cmd: quotaEnableSimple}
	if ioctl(p.rootFd, iocQuotaCtl, unsafe.Pointer(&q)) != nil {
		q = quotaCtlArgs{cmd: quotaEnable}
		if err := ioctl(p.rootFd, iocQuotaCtl, unsafe.Pointer(&q)); err != nil {
			return fmt.Errorf("%w: enabling btrfs quota groups: %v", ErrUnavailable, err)
		}
	}
	return nil
}

// Size is the pool's size in bytes.
func (p *Pool) Size() int64 { return p.size }

// Dir is where the pool's (unlinked) backing file lives.
func (p *Pool) Dir() string { return p.dir }

// Device is the pool's loop device, which a sandbox's init mounts.
func (p *Pool) Device() string { return p.device }

// Volume is one subvolume of a pool, with a limit on what it holds.
type Volume struct {
	pool *Pool
	name string
}

// Create makes the volume name (a single path element) holding at most
// limit bytes (0: only the pool's size bounds it).
func (p *Pool) Create(name string, limit int64) (*Volume, error) {
	var args volArgs
	if len(name) == 0 || len(name) >= len(args.name) || bytes.ContainsAny([]byte(name), "/\x00") || name == "." || name == ".." {
		return nil, fmt.Errorf("invalid volume name %q", name)
	}
	copy(args.name[:], name)
	if err := ioctl(p.rootFd, iocSubvolCreate, unsafe.Pointer(&args)); err != nil {
		return nil, fmt.Errorf("creating btrfs subvolume %s: %w", name, err)
	}
	v := &Volume{pool: p, name: name}
	if limit > 0 {
		fd, err := unix.Openat(p.rootFd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == nil {
			// Quota group 0 names the subvolume fd is in.
			lim := qgroupLimitArgs{flags: qgroupLimitMaxRfer, maxRfer: uint64(limit)}
			err = ioctl(fd, iocQgroupLimit, unsafe.Pointer(&lim))
			unix.Close(fd)
		}
		if err != nil {
			v.Remove()
			return nil, fmt.Errorf("limiting btrfs subvolume %s to %d bytes: %w", name, limit, err)
		}
	}
	return v, nil
}

// Name is the subvolume's name: mount the pool's device with subvol=Name.
func (v *Volume) Name() string { return v.name }

// Path is where this process reaches the volume (through the pool's
// descriptor; the path means nothing to other processes).
func (v *Volume) Path() string {
	return "/proc/self/fd/" + strconv.Itoa(v.pool.rootFd) + "/" + v.name
}

// Remove deletes the volume and everything in it. It fails with EBUSY while
// a mount of it lives (a sandbox's namespace still exists), so it retries
// for a little while.
func (v *Volume) Remove() error {
	var args volArgs
	copy(args.name[:], v.name)
	var err error
	for i := 0; i < 100; i++ {
		if err = ioctl(v.pool.rootFd, iocSnapDestroy, unsafe.Pointer(&args)); !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing btrfs subvolume %s: %w", v.name, err)
	}
	return nil
}

// Close lets go of the pool. Volumes still mounted in sandboxes keep the
// device until those sandboxes end; then it detaches itself.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	for _, fd := range []*int{&p.rootFd, &p.mountFd} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
	if p.loop != nil {
		return p.loop.Close()
	}
	return nil
}
