package mount

import (
	"fmt"
	"strings"
)

// Mount is one mount(2) call.
type Mount struct {
	Source string
	Target string
	FSType string
	Flags  uintptr
	Data   string
}

// Flag names used in error messages.
var flagNames = []struct {
	bit  uintptr
	name string
}{
	{msRdonly, "ro"}, {msNosuid, "nosuid"}, {msNodev, "nodev"}, {msNoexec, "noexec"},
	{msRemount, "remount"}, {msBind, "bind"}, {msRec, "rec"}, {msPrivate, "private"},
}

// FlagString renders flags as a comma-separated list for messages.
func FlagString(flags uintptr) string {
	var parts []string
	for _, f := range flagNames {
		if flags&f.bit != 0 {
			parts = append(parts, f.name)
			flags &^= f.bit
		}
	}
	if flags != 0 {
		parts = append(parts, fmt.Sprintf("0x%x", flags))
	}
	return strings.Join(parts, ",")
}

func (m Mount) String() string {
	return fmt.Sprintf("mount(source=%q target=%q type=%q flags=%s data=%q)", m.Source, m.Target, m.FSType, FlagString(m.Flags), m.Data)
}

// OverlayOptions are the parts of an overlayfs mount.
type OverlayOptions struct {
	// Lowers are read-only layers, bottom first (the order a user thinks in);
	// overlayfs wants them top first, which Overlay takes care of.
	Lowers []string
	Upper  string // writable upper dir; empty gives a read-only overlay
	Work   string // overlay work dir, same filesystem as Upper
	// UserXattr stores overlay metadata in user.* xattrs, which is what an
	// unprivileged user namespace can write.
	UserXattr bool
	// Volatile leaves out every sync of the upper dir's filesystem
	// (overlayfs's volatile, Linux 5.10+): fsync and sync in the overlay
	// return at once, and its unmount does not sync the upper filesystem.
	// Only for an upper dir thrown away with the mount: after a crash its
	// contents are undefined, and overlayfs refuses to mount the same work
	// dir again.
	Volatile bool
}

// maxOverlayData is the limit the kernel puts on mount data (one page).
const maxOverlayData = 4095

// Overlay returns the overlayfs mount of opts at target.
func Overlay(target string, opts OverlayOptions) (Mount, error) {
	if len(opts.Lowers) == 0 {
		return Mount{}, fmt.Errorf("overlay at %s: at least one lower dir is needed", target)
	}
	top := make([]string, len(opts.Lowers))
	for i, l := range opts.Lowers {
		if strings.ContainsAny(l, ":,\\") {
			return Mount{}, fmt.Errorf("overlay at %s: lower dir %q contains ':', ',' or '\\', which overlayfs cannot take", target, l)
		}
		top[len(opts.Lowers)-1-i] = l
	}
	data := "lowerdir=" + strings.Join(top, ":")
	if opts.Upper != "" {
		data += ",upperdir=" + opts.Upper + ",workdir=" + opts.Work
	}
	if opts.UserXattr {
		data += ",userxattr"
	}
	if opts.Volatile && opts.Upper != "" {
		data += ",volatile"
	}
	if len(data) > maxOverlayData {
		return Mount{}, fmt.Errorf("overlay at %s: %d bytes of options exceed the kernel's %d (too many or too long layer paths)", target, len(data), maxOverlayData)
	}
	return Mount{Source: "overlay", Target: target, FSType: "overlay", Data: data}, nil
}

// Bind returns the mounts that bind src at target: the bind itself and, when
// readOnly, the remount that makes it read-only (a bind mount cannot be made
// read-only in one call).
func Bind(src, target string, readOnly bool) []Mount {
	ms := []Mount{{Source: src, Target: target, Flags: msBind | msRec}}
	if readOnly {
		ms = append(ms, Mount{Target: target, Flags: msBind | msRemount | msRdonly | msNosuid | msNodev})
	}
	return ms
}

// Tmpfs returns a tmpfs mount at target with the given options
// (for example "size=64m,mode=1777").
func Tmpfs(target string, flags uintptr, data string) Mount {
	return Mount{Source: "tmpfs", Target: target, FSType: "tmpfs", Flags: flags, Data: data}
}
