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
// option, so a value may hold commas (overlayfs's escaped paths); an
// overlay's lowerdir longer than fsconfig takes goes as one lowerdir+ a
// lower dir (lowerdirPlus). An error names the option or step refused and
// carries what the kernel logged on the filesystem context.
func Detached(fstype string, options []string, attr int) (int, error) {
	fs, err := unix.Fsopen(fstype, unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen %s: %w", fstype, err)
	}
	defer unix.Close(fs)
	for _, kv := range options {
		if k, v, ok := strings.Cut(kv, "="); ok && fstype == "overlay" && k == "lowerdir" && len(v) > maxFsconfigString {
			err = lowerdirPlus(fs, v)
		} else if ok {
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

// maxFsconfigString is the longest string value fsconfig(2) takes: the
// kernel copies at most 256 bytes of it, the NUL among them, and refuses
// a longer one (EINVAL).
const maxFsconfigString = 255

// lowerdirPlus gives overlay context fs the lower dirs of lowerdir value
// v (top first, ':' between them, '\' escaping) one at a time, as
// overlayfs's lowerdir+ option takes them (Linux 6.8+, unescaped): a
// value longer than fsconfig takes at once (some 14 lower dirs named as
// /proc/self/fd/N) cannot go as one lowerdir. Data-only lower dirs
// ("::") have their own option and are not split here.
func lowerdirPlus(fs int, v string) error {
	if strings.Contains(v, "::") {
		return fmt.Errorf("%d bytes of lower dirs with data-only ones: more than fsconfig takes (%d)", len(v), maxFsconfigString)
	}
	var dirs []string
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\' && i+1 < len(v):
			i++
			b.WriteByte(v[i])
		case c == ':':
			dirs = append(dirs, b.String())
			b.Reset()
		default:
			b.WriteByte(c)
		}
	}
	dirs = append(dirs, b.String())
	for _, d := range dirs {
		if err := unix.FsconfigSetString(fs, "lowerdir+", d); err != nil {
			return fmt.Errorf("lower dir %s of %d, as lowerdir+ (Linux 6.8+; the %d bytes of lowerdir are more than fsconfig takes): %w", d, len(dirs), len(v), err)
		}
	}
	return nil
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
