package mount

import (
	"fmt"
	"strings"

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

// Detached makes a filesystem of type fstype through the mount API
// (fsopen, fsconfig, fsmount), attached nowhere, and returns its mount's
// descriptor (close-on-exec) with mount attributes attr (MOUNT_ATTR_*).
// Each of options is "key=value" or a flag alone; it is passed as one
// option, so a value may hold commas (overlayfs's escaped paths). An
// error names the option or step refused and carries what the kernel
// logged on the filesystem context.
func Detached(fstype string, options []string, attr int) (int, error) {
	fs, err := unix.Fsopen(fstype, unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen %s: %w", fstype, err)
	}
	defer unix.Close(fs)
	for _, kv := range options {
		if k, v, ok := strings.Cut(kv, "="); ok {
			err = unix.FsconfigSetString(fs, k, v)
		} else {
			err = unix.FsconfigSetFlag(fs, kv)
		}
		if err != nil {
			return -1, fmt.Errorf("%s option %s: %w%s", fstype, kv, err, fsLog(fs))
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		why := fsLog(fs)
		if why == "" {
			why = " (the kernel's log says why)"
		}
		return -1, fmt.Errorf("creating the %s (%s): %w%s", fstype, strings.Join(options, ","), err, why)
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, attr)
	if err != nil {
		return -1, fmt.Errorf("fsmount %s: %w%s", fstype, err, fsLog(fs))
	}
	return mnt, nil
}

// fsLog returns the messages the kernel logged on filesystem context fs
// (fsopen(2)), each after "; ", or "". Kernels before overlayfs's own
// mount API (6.5) log its refusals only in the kernel's log.
func fsLog(fs int) string {
	var b strings.Builder
	buf := make([]byte, 1024)
	for range 16 {
		n, err := unix.Read(fs, buf)
		if err != nil || n <= 0 {
			break
		}
		b.WriteString("; ")
		b.Write(buf[:n])
	}
	return b.String()
}
