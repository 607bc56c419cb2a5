package sbinit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// StageShift carries out a wire.ShiftPlan read from stdin. The host starts
// it in a user namespace that maps the caller to root and its subordinate
// ids above, as a rootless sandbox whose user is not root has them (see
// sandbox.Shift): there it can give the copies their owners, which the
// caller cannot.
const StageShift = "shift"

func shiftMain() error {
	var p wire.ShiftPlan
	if err := json.NewDecoder(os.Stdin).Decode(&p); err != nil {
		return fmt.Errorf("reading the plan: %w", err)
	}
	sh := &shifter{from: map[string]int{}, copies: map[[2]uint64]string{}}
	defer sh.close()
	for _, d := range append([]string{p.Dir}, p.Dirs...) {
		fd, err := unix.Open(d, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening %s: %w", d, err)
		}
		sh.dsts = append(sh.dsts, fd)
	}
	for _, e := range p.Entries {
		if e.Layer < 0 || e.Layer >= len(sh.dsts) {
			return fmt.Errorf("copying /%s: no layer %d", e.Path, e.Layer)
		}
		sh.dst = sh.dsts[e.Layer]
		if err := sh.entry(e); err != nil {
			return fmt.Errorf("copying /%s from %s: %w", e.Path, e.From, err)
		}
	}
	// A directory's times last: making what it holds changed them.
	for i := len(sh.dirs) - 1; i >= 0; i-- {
		d := sh.dirs[i]
		if err := unix.UtimesNanoAt(d.dst, d.path, d.times[:], unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("setting the times of /%s: %w", d.path, err)
		}
	}
	return nil
}

// shifter copies a plan's entries into dst.
type shifter struct {
	dst    int                  // the layer of the entry at hand, one of dsts
	dsts   []int                // the plan's Dir, then its Dirs
	from   map[string]int       // layer trees opened (O_PATH)
	copies map[[2]uint64]string // a source inode's first copy
	dirs   []shiftedDir
}

// shiftedDir is a directory copied, whose times are set last.
type shiftedDir struct {
	dst   int
	path  string
	times [2]unix.Timespec
}

func (sh *shifter) close() {
	for _, fd := range sh.from {
		unix.Close(fd)
	}
	for _, fd := range sh.dsts {
		unix.Close(fd)
	}
}

// beneath resolves name under dir, never through a symlink or out of dir.
func beneath(dir int, name string, flags uint64) (int, error) {
	return unix.Openat2(dir, name, &unix.OpenHow{Flags: flags | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
}

func (sh *shifter) entry(e wire.ShiftEntry) error {
	root, ok := sh.from[e.From]
	if !ok {
		fd, err := unix.Open(e.From, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		sh.from[e.From], root = fd, fd
	}
	var st unix.Stat_t
	src, err := beneath(root, e.Path, unix.O_PATH)
	if err != nil {
		return err
	}
	defer unix.Close(src)
	if err := unix.Fstat(src, &st); err != nil {
		return err
	}
	dir, base := path.Split(e.Path)
	parent := sh.dst
	if dir != "" {
		if parent, err = beneath(sh.dst, dir, unix.O_PATH|unix.O_DIRECTORY); err != nil {
			return fmt.Errorf("opening its directory in the copy: %w", err)
		}
		defer unix.Close(parent)
	}
	times := [2]unix.Timespec{st.Atim, st.Mtim}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if e.Path != "." {
			if err := unix.Mkdirat(parent, base, 0o700); err != nil {
				return err
			}
		}
		in, err := beneath(root, e.Path, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return err
		}
		defer unix.Close(in)
		out, err := beneath(sh.dst, e.Path, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return err
		}
		defer unix.Close(out)
		if err := giveAttrs(in, out, e, st.Mode); err != nil {
			return err
		}
		sh.dirs = append(sh.dirs, shiftedDir{sh.dst, e.Path, times})
		return nil
	case unix.S_IFREG:
		key := [2]uint64{st.Dev, st.Ino}
		if first, ok := sh.copies[key]; ok {
			return unix.Linkat(sh.dst, first, parent, base, 0)
		}
		in, err := beneath(root, e.Path, unix.O_RDONLY)
		if err != nil {
			return err
		}
		defer unix.Close(in)
		out, err := unix.Openat(parent, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		defer unix.Close(out)
		if err := copyContent(out, in); err != nil {
			return err
		}
		if err := giveAttrs(in, out, e, st.Mode); err != nil {
			return err
		}
		sh.copies[key] = e.Path
		return unix.UtimesNanoAt(out, "", times[:], unix.AT_EMPTY_PATH)
	case unix.S_IFLNK:
		target, err := readlink(src)
		if err != nil {
			return err
		}
		if err := unix.Symlinkat(target, parent, base); err != nil {
			return err
		}
	case unix.S_IFIFO:
		if err := unix.Mknodat(parent, base, unix.S_IFIFO|0o600, 0); err != nil {
			return err
		}
		if err := unix.Fchmodat(parent, base, st.Mode&0o7777, 0); err != nil {
			return err
		}
	default: // whiteouts, sockets, devices: no layer holds one that a user owns
		return nil
	}
	if err := unix.Fchownat(parent, base, e.UID, e.GID, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	return unix.UtimesNanoAt(parent, base, times[:], unix.AT_SYMLINK_NOFOLLOW)
}

// giveAttrs gives out (a copy of in) its owner, mode (with setuid and
// setgid, which chown clears) and extended attributes but the overlay's
// own markers (an opaque copy would hide the layers below it), after
// chown, which clears a file capability.
func giveAttrs(in, out int, e wire.ShiftEntry, mode uint32) error {
	if err := unix.Fchown(out, e.UID, e.GID); err != nil {
		return err
	}
	if err := unix.Fchmod(out, mode&0o7777); err != nil {
		return err
	}
	names, err := xattrNames(in)
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasPrefix(n, "trusted.overlay.") || strings.HasPrefix(n, "user.overlay.") {
			continue
		}
		v, err := xattr(in, n)
		if errors.Is(err, unix.ENODATA) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", n, err)
		}
		if err := unix.Fsetxattr(out, n, v, 0); err != nil {
			return fmt.Errorf("setting %s: %w", n, err)
		}
	}
	return nil
}

// copyContent clones in's content into out where the filesystem shares
// blocks (btrfs, XFS), else copies it (copy_file_range).
func copyContent(out, in int) error {
	if unix.IoctlFileClone(out, in) == nil {
		return nil
	}
	var files [2]*os.File
	for i, fd := range []int{out, in} {
		d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return err
		}
		files[i] = os.NewFile(uintptr(d), "copy")
		defer files[i].Close()
	}
	_, err := io.Copy(files[0], files[1])
	return err
}

func readlink(fd int) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

func xattrNames(fd int) ([]string, error) {
	n, err := unix.Flistxattr(fd, nil)
	if err != nil || n == 0 {
		if errors.Is(err, unix.ENOTSUP) {
			err = nil
		}
		return nil, err
	}
	buf := make([]byte, n)
	if n, err = unix.Flistxattr(fd, buf); err != nil {
		return nil, err
	}
	var names []string
	for _, b := range bytes.Split(buf[:n], []byte{0}) {
		if len(b) > 0 {
			names = append(names, string(b))
		}
	}
	return names, nil
}

func xattr(fd int, name string) ([]byte, error) {
	n, err := unix.Fgetxattr(fd, name, nil)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	n, err = unix.Fgetxattr(fd, name, buf)
	return buf[:n], err
}
