package mount

import (
	"fmt"

	"golang.org/x/sys/unix"
)

const (
	msRdonly  = unix.MS_RDONLY
	msNosuid  = unix.MS_NOSUID
	msNodev   = unix.MS_NODEV
	msNoexec  = unix.MS_NOEXEC
	msRemount = unix.MS_REMOUNT
	msBind    = unix.MS_BIND
	msRec     = unix.MS_REC
	msPrivate = unix.MS_PRIVATE
)

// Apply performs the mounts in order and stops at the first error.
func Apply(ms []Mount) error {
	for _, m := range ms {
		if err := m.Mount(); err != nil {
			return err
		}
	}
	return nil
}

// Mount performs m. A read-only bind remount keeps the flags the kernel has
// locked on the source (nosuid, nodev, noexec, atime flags), which a user
// namespace may not clear.
func (m Mount) Mount() error {
	flags := m.Flags
	if flags&unix.MS_REMOUNT != 0 && flags&unix.MS_BIND != 0 {
		var st unix.Statfs_t
		if err := unix.Statfs(m.Target, &st); err == nil {
			flags |= uintptr(st.Flags) & (unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC |
				unix.MS_NOATIME | unix.MS_NODIRATIME | unix.MS_RELATIME)
		}
	}
	if err := unix.Mount(m.Source, m.Target, m.FSType, flags, m.Data); err != nil {
		m.Flags = flags
		return fmt.Errorf("%s: %w", m, err)
	}
	return nil
}
