package sbinit

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// giveOwners chowns the paths of owners under root, the root init built,
// each in its own mount only (a path under /tmp, /dev or a bind that init
// mounted stays as it is), never through a symlink, and skips a path that
// is gone (a layer above the image deleted it). Setuid and setgid bits,
// which chown clears, are set again.
func giveOwners(root string, owners []wire.Owner) error {
	if len(owners) == 0 {
		return nil
	}
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the root %s: %w", root, err)
	}
	defer unix.Close(rfd)
	for _, o := range owners {
		if err := giveOwner(rfd, o); err != nil {
			return fmt.Errorf("giving /%s the owner %d:%d: %w", o.Path, o.UID, o.GID, err)
		}
	}
	return nil
}

func giveOwner(rfd int, o wire.Owner) error {
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV}
	fd, err := unix.Openat2(rfd, o.Path, how)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return nil
	case err != nil:
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if err := unix.Fchownat(fd, "", o.UID, o.GID, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK || st.Mode&(unix.S_ISUID|unix.S_ISGID) == 0 {
		return nil
	}
	return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), st.Mode&0o7777)
}
