package pool

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Volume is one subvolume of a pool, with a limit on what it holds, owned
// by the process that made it.
type Volume struct {
	pool  *Pool
	name  string
	owner int // the locked owner file
}

// Create makes the volume name (a single path element, not starting with
// a dot) holding at most limit bytes (0: only the pool's size bounds it).
// This process owns it until Remove.
func (p *Pool) Create(name string, limit int64) (*Volume, error) {
	var args volArgs
	if len(name) == 0 || len(name) >= len(args.name) || name[0] == '.' || strings.ContainsAny(name, "/\x00") {
		return nil, fmt.Errorf("invalid volume name %q", name)
	}
	owner, err := p.lockOwner(name, true)
	if err != nil {
		return nil, err
	}
	copy(args.name[:], name)
	if err := ioctl(p.rootFd, iocSubvolCreate, unsafe.Pointer(&args)); err != nil {
		p.dropOwner(name, owner)
		return nil, fmt.Errorf("creating btrfs subvolume %s: %w", name, err)
	}
	v := &Volume{pool: p, name: name, owner: owner}
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

// ErrInUse means another process owns a volume of that name.
var ErrInUse = errors.New("volume owned by another process")

// lockOwner opens and locks the owner file of volume name. A Reclaim holds
// an owner file for a moment only: Create (wait) tries again for up to a
// second; Reclaim does not. A file that a Reclaim unlinked meanwhile is not
// the owner file any more: it opens the new one.
func (p *Pool) lockOwner(name string, wait bool) (int, error) {
	for try := 0; ; try++ {
		fd, err := unix.Openat(p.owners, name, unix.O_CREAT|unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return -1, fmt.Errorf("opening the owner file of volume %s: %w", name, err)
		}
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err == nil && st.Nlink > 0 {
				unix.Pwrite(fd, []byte(strconv.Itoa(os.Getpid())+"\n"), 0)
				return fd, nil
			}
		}
		unix.Close(fd)
		switch {
		case err == nil: // unlinked: open the new one
		case !errors.Is(err, unix.EWOULDBLOCK):
			return -1, fmt.Errorf("locking the owner file of volume %s: %w", name, err)
		case !wait || try == 100:
			return -1, fmt.Errorf("volume %s: %w", name, ErrInUse)
		default:
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// dropOwner unlinks and unlocks an owner file whose volume is gone.
func (p *Pool) dropOwner(name string, fd int) {
	unix.Unlinkat(p.owners, name, 0)
	unix.Close(fd)
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
	var err error
	for i := 0; i < 100; i++ {
		if err = v.pool.destroy(v.name); !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	v.pool.dropOwner(v.name, v.owner)
	return nil
}

// destroy deletes the subvolume name; one that is not there is no error.
func (p *Pool) destroy(name string) error {
	var args volArgs
	copy(args.name[:], name)
	err := ioctl(p.rootFd, iocSnapDestroy, unsafe.Pointer(&args))
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing btrfs subvolume %s: %w", name, err)
	}
	return nil
}

// Reclaimed says what Reclaim found.
type Reclaimed struct {
	Removed []string // orphaned volumes deleted
	Busy    []string // orphaned volumes still mounted (their sandbox's namespace lives): left for later
	Errors  []error
}

// Reclaim deletes the orphaned volumes of the pool: those whose owner file
// no process holds locked (its owner died, even by SIGKILL, before
// removing it). A volume of a live owner, in this or another process, is
// never touched.
func (p *Pool) Reclaim() Reclaimed {
	var r Reclaimed
	vols, err := p.Volumes()
	if err != nil {
		r.Errors = append(r.Errors, err)
		return r
	}
	owners, err := readNames(p.owners)
	if err != nil {
		r.Errors = append(r.Errors, err)
		return r
	}
	// Owner files without a subvolume too: a process died before making
	// its volume or after deleting it.
	names := slices.Clone(vols)
	for _, name := range owners {
		if !slices.Contains(vols, name) {
			names = append(names, name)
		}
	}
	for _, name := range names {
		fd, err := p.lockOwner(name, false)
		if err != nil {
			continue // a live owner holds it
		}
		err = p.destroy(name)
		switch {
		case errors.Is(err, unix.EBUSY):
			r.Busy = append(r.Busy, name)
			unix.Close(fd)
			continue
		case err != nil:
			r.Errors = append(r.Errors, err)
			unix.Close(fd)
			continue
		}
		p.dropOwner(name, fd)
		if slices.Contains(vols, name) {
			r.Removed = append(r.Removed, name)
		}
	}
	return r
}

// Volumes lists the names of the pool's volumes, of live and of dead
// owners.
func (p *Pool) Volumes() ([]string, error) {
	names, err := readNames(p.rootFd)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(names, func(n string) bool { return n[0] == '.' }), nil
}

// readNames lists the directory dirFd (without moving dirFd's offset).
func readNames(dirFd int) ([]string, error) {
	fd, err := unix.Openat(dirFd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("listing the pool: %w", err)
	}
	f := os.NewFile(uintptr(fd), "pool")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("listing the pool: %w", err)
	}
	return names, nil
}
