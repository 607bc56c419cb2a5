package pool

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// usernsPrefix starts the names of the files in a pool directory on which
// user namespaces are bound (see Userns); Destroy unbinds them.
const usernsPrefix = "userns-"

// Userns returns the user namespace bound on the file userns-<name> in the
// directory dir of an existing pool. When none is bound there (the pool's
// first user, or after a reboot) it makes one with mk, under the pool's
// lock, and binds it there for the processes after this one; Destroy (and
// so Release) unbinds it with the pool. A user namespace that no process
// lives in costs the host nothing to keep; making one costs a process a
// fork and an exec. Only root can bind there (dir is root's, mode 0700, as
// Open checks), so what is bound there is trusted: it is checked to be a
// user namespace owned by root, not what it maps, which name must
// therefore say. Without a pool in dir it is ErrUnavailable (the caller
// makes a namespace of its own); one made but not bound is returned
// without error.
func Userns(dir, name string, mk func() (*os.File, error)) (*os.File, error) {
	if !Exists(dir) {
		return nil, fmt.Errorf("%w: no pool in %s", ErrUnavailable, dir)
	}
	// Before anything in it is trusted: a directory of root's (not a
	// symlink, which could lead into another mount namespace).
	if err := ensureDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, usernsPrefix+name)
	if ns, err := openUserns(path); err == nil {
		return ns, nil
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if ns, err := openUserns(path); err == nil {
		return ns, nil // bound while this process waited
	}
	if !Exists(dir) { // released while this process waited
		return nil, fmt.Errorf("%w: no pool in %s", ErrUnavailable, dir)
	}
	ns, err := mk()
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return ns, nil
	}
	f.Close()
	// The next process finds it bound; this one, or any if the bind fails,
	// uses the namespace it made.
	_ = unix.Mount("/proc/self/fd/"+strconv.Itoa(int(ns.Fd())), path, "", unix.MS_BIND, "")
	return ns, nil
}

// openUserns opens the user namespace bound at path.
func openUserns(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil || fs.Type != unix.NSFS_MAGIC {
		f.Close()
		return nil, fmt.Errorf("no namespace bound at %s", path)
	}
	if t, err := unix.IoctlRetInt(fd, unix.NS_GET_NSTYPE); err != nil || t != unix.CLONE_NEWUSER {
		f.Close()
		return nil, fmt.Errorf("the namespace bound at %s is not a user namespace", path)
	}
	var owner uint32
	if err := ioctl(fd, unix.NS_GET_OWNER_UID, unsafe.Pointer(&owner)); err != nil || owner != 0 {
		f.Close()
		return nil, fmt.Errorf("the user namespace bound at %s is not root's", path)
	}
	return f, nil
}

// unbindUsernses unbinds every namespace bound in dir.
func unbindUsernses(dir string) {
	names, _ := filepath.Glob(filepath.Join(dir, usernsPrefix+"*"))
	for _, n := range names {
		for unix.Unmount(n, unix.MNT_DETACH) == nil {
		}
	}
}
