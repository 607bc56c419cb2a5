package sbinit

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// File operations run in the supervisor, whose root is the sandbox root, and
// resolve every path with RESOLVE_IN_ROOT and RESOLVE_NO_MAGICLINKS: a
// symlink the agent planted is followed as the agent would see it, never to
// a host file, and /proc's magic links (/proc/1/root, /proc/self/fd/N) are
// refused.

const resolveFlags = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS

// defaultReadLimit bounds file.read when the request sets no limit.
const defaultReadLimit = 64 << 20

func openIn(dirfd int, p string, flags int, mode uint32) (*os.File, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolveFlags}
	fd, err := unix.Openat2(dirfd, p, &how)
	if err != nil {
		return nil, pathError(p, err)
	}
	return os.NewFile(uintptr(fd), p), nil
}

func pathError(p string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT):
		return fail(wire.CodeNotFound, "%s: no such file or directory", p)
	case errors.Is(err, unix.EXDEV), errors.Is(err, unix.ELOOP):
		return fail(wire.CodeEscape, "%s: path leaves the sandbox root or crosses a magic link", p)
	}
	return fmt.Errorf("%s: %w", p, err)
}

func checkAbs(p string) error {
	if !filepath.IsAbs(p) {
		return fail(wire.CodeInvalid, "path %q must be absolute", p)
	}
	return nil
}

func readFile(req *wire.Request) (wire.Response, error) {
	if err := checkAbs(req.Path); err != nil {
		return wire.Response{}, err
	}
	f, err := openIn(rootFd, req.Path, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return wire.Response{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return wire.Response{}, err
	}
	if !fi.Mode().IsRegular() {
		return wire.Response{}, fail(wire.CodeInvalid, "%s is not a regular file", req.Path)
	}
	limit := req.Limit
	if limit <= 0 {
		limit = defaultReadLimit
	}
	if fi.Size() > limit {
		return wire.Response{}, fail(wire.CodeTooLarge, "%s is %d bytes, over the limit of %d", req.Path, fi.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit))
	return wire.Response{Data: b}, err
}

// writeFile writes req.Data to req.Path, creating parent directories.
func writeFile(req *wire.Request) error {
	if err := checkAbs(req.Path); err != nil {
		return err
	}
	dir, base := filepath.Split(filepath.Clean(req.Path))
	if base == "" {
		return fail(wire.CodeInvalid, "cannot write to %s", req.Path)
	}
	if err := mkdirAllIn(rootFd, dir); err != nil {
		return pathError(dir, err)
	}
	d, err := openIn(rootFd, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	mode := req.Mode
	if mode == 0 {
		mode = 0o644
	}
	return writeAt(int(d.Fd()), base, bytes.NewReader(req.Data), mode, req.Owner)
}

// writeAt writes r to name in dirfd with mode and, when owner is not nil,
// that owner. The owner is set before mode, and mode only where the
// file's differs: a new file written for a user changes attributes once,
// as envd's (create, chown, write), so a watcher sees what E2B's sees.
// Only a regular file is written, as readFile reads only one: the open
// does not wait for a named pipe's reader (O_NONBLOCK), and nothing waits
// on what the agent's processes do while it holds a slot of the
// supervisor's gate (slots).
func writeAt(dirfd int, name string, r io.Reader, mode uint32, owner *wire.FileOwner) error {
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, mode&0o7777)
	if err != nil {
		return pathError(name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return pathError(name, err)
	} else if !fi.Mode().IsRegular() {
		return fail(wire.CodeInvalid, "%s is not a regular file", name)
	}
	if err := setOwnerMode(f, mode&0o777, owner); err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return f.Close()
}

func listDir(req *wire.Request) (wire.Response, error) {
	if err := checkAbs(req.Path); err != nil {
		return wire.Response{}, err
	}
	d, err := openIn(rootFd, req.Path, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return wire.Response{}, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return wire.Response{}, err
	}
	var out []wire.Entry
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(int(d.Fd()), n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		e := wire.Entry{Name: n, Size: st.Size, Mode: st.Mode & 0o7777, ModTime: st.Mtim.Sec, Type: typeName(st.Mode),
			UID: int(st.Uid), GID: int(st.Gid)}
		if e.Type == "symlink" {
			buf := make([]byte, 4096)
			if k, err := unix.Readlinkat(int(d.Fd()), n, buf); err == nil {
				e.Target = string(buf[:k])
			}
		}
		out = append(out, e)
	}
	return wire.Response{Entries: out}, nil
}

func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	}
	return "other"
}

// putTar unpacks req.Data (a tar stream) into directory req.Path. Entries
// are resolved with that directory as their root, so "../x", absolute
// names and symlinks inside the archive cannot place files outside it.
func putTar(req *wire.Request) error {
	if err := checkAbs(req.Path); err != nil {
		return err
	}
	if err := mkdirAllIn(rootFd, req.Path); err != nil {
		return pathError(req.Path, err)
	}
	d, err := openIn(rootFd, req.Path, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	tr := tar.NewReader(bytes.NewReader(req.Data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fail(wire.CodeInvalid, "reading tar: %v", err)
		}
		if err := putEntry(int(d.Fd()), h, tr); err != nil {
			return fmt.Errorf("unpacking %s: %w", h.Name, err)
		}
	}
}

func putEntry(rootfd int, h *tar.Header, r io.Reader) error {
	name := filepath.Clean("/" + h.Name)
	if name == "/" {
		return nil
	}
	dir, base := filepath.Split(name)
	if err := mkdirAllIn(rootfd, dir); err != nil {
		return err
	}
	pd, err := openIn(rootfd, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer pd.Close()
	pfd := int(pd.Fd())
	mode := uint32(h.Mode) & 0o7777
	switch h.Typeflag {
	case tar.TypeDir:
		if err := unix.Mkdirat(pfd, base, mode|0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
		return nil
	case tar.TypeReg:
		return writeAt(pfd, base, r, mode, nil)
	case tar.TypeSymlink:
		unix.Unlinkat(pfd, base, 0)
		return unix.Symlinkat(h.Linkname, pfd, base)
	}
	return fail(wire.CodeInvalid, "tar entry type %q is not supported (regular files, directories and symlinks are)", string(h.Typeflag))
}

// getTar packs req.Path (a file or a directory) as a tar stream. Symlinks
// are stored as symlinks, never followed.
func getTar(req *wire.Request) (wire.Response, error) {
	if err := checkAbs(req.Path); err != nil {
		return wire.Response{}, err
	}
	root, err := openIn(rootFd, req.Path, unix.O_PATH, 0)
	if err != nil {
		return wire.Response{}, err
	}
	defer root.Close()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	limit := req.Limit
	if limit <= 0 {
		limit = wire.MaxFrame / 2
	}
	w := &tarWalker{tw: tw, limit: limit}
	if err := w.add(int(root.Fd()), ".", filepath.Base(req.Path)); err != nil {
		return wire.Response{}, err
	}
	if err := tw.Close(); err != nil {
		return wire.Response{}, err
	}
	return wire.Response{Data: buf.Bytes()}, nil
}

type tarWalker struct {
	tw    *tar.Writer
	limit int64
	total int64
}

// add writes the entry at rel (relative to dirfd, never following a
// symlink) under the archive name name, recursing into directories.
func (w *tarWalker) add(dirfd int, rel, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, rel, &st, unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH); err != nil {
		return pathError(name, err)
	}
	h := &tar.Header{Name: name, Mode: int64(st.Mode & 0o7777), ModTime: timeOf(st), Uid: int(st.Uid), Gid: int(st.Gid)}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		w.total += st.Size
		if w.total > w.limit {
			return fail(wire.CodeTooLarge, "archive exceeds %d bytes", w.limit)
		}
		fd, err := unix.Openat(dirfd, rel, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return pathError(name, err)
		}
		f := os.NewFile(uintptr(fd), name)
		defer f.Close()
		h.Typeflag, h.Size = tar.TypeReg, st.Size
		if err := w.tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = io.CopyN(w.tw, f, st.Size)
		return err
	case unix.S_IFLNK:
		buf := make([]byte, 4096)
		n, err := unix.Readlinkat(dirfd, rel, buf)
		if err != nil {
			return err
		}
		h.Typeflag, h.Linkname = tar.TypeSymlink, string(buf[:n])
		return w.tw.WriteHeader(h)
	case unix.S_IFDIR:
		h.Typeflag, h.Name = tar.TypeDir, name+"/"
		if err := w.tw.WriteHeader(h); err != nil {
			return err
		}
		fd, err := unix.Openat(dirfd, rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return pathError(name, err)
		}
		d := os.NewFile(uintptr(fd), name)
		defer d.Close()
		names, err := d.Readdirnames(-1)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := w.add(fd, n, strings.TrimSuffix(name, "/")+"/"+n); err != nil {
				return err
			}
		}
	}
	return nil // devices, fifos and sockets are skipped
}

// rootFd is the sandbox root, opened by the supervisor at start; paths are
// resolved against it.
var rootFd = unix.AT_FDCWD

func openRoot() error {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening sandbox root: %w", err)
	}
	rootFd = fd
	return nil
}

// setOwnerMode gives f owner (nil: none) and mode; see writeAt.
func setOwnerMode(f *os.File, mode uint32, owner *wire.FileOwner) error {
	if owner == nil {
		return f.Chmod(fs.FileMode(mode))
	}
	if err := f.Chown(owner.UID, owner.GID); err != nil {
		return fmt.Errorf("giving %s the owner %d:%d: %w", f.Name(), owner.UID, owner.GID, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if st.Mode&0o7777 == mode {
		return nil
	}
	return f.Chmod(fs.FileMode(mode))
}
