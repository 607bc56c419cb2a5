package rootfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Lookups in a root's materialized layer trees (bottom first), as the
// overlay of them shows a path: the topmost tree that has the path wins, a
// whiteout there hides it, and symlinks resolve inside that tree (an
// image's absolute /etc/passwd link never reads the host's).

// ErrNoUser: an image's USER names a user or group that its /etc/passwd or
// /etc/group does not have.
var ErrNoUser error = &imageError{"no such user in the image"}

// maxAccountFile bounds the /etc/passwd or /etc/group read from an image.
const maxAccountFile = 4 << 20

// openIn opens rel in the topmost tree that has it, resolving symlinks
// inside that tree. ok is false when no tree has it, or when a tree above
// the one that has it deletes the path or one of its directories (a
// whiteout) or makes one of them opaque.
func openIn(trees []string, rel string, flags uint64) (f *os.File, ok bool, err error) {
	rel = strings.Trim(rel, "/")
	for i := len(trees) - 1; i >= 0; i-- {
		f, found, hidden, err := openInTree(trees[i], rel, flags)
		if err != nil || found {
			return f, found, err
		}
		if hidden {
			return nil, false, nil
		}
	}
	return nil, false, nil
}

// openInTree is openIn on one tree. Without the path, hidden says whether
// this tree hides it in lower trees: a whiteout on it or a directory of
// it, or a directory of it that is opaque.
func openInTree(tree, rel string, flags uint64) (f *os.File, found, hidden bool, err error) {
	root, err := unix.Open(tree, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, false, fmt.Errorf("opening layer tree %s: %w", tree, err)
	}
	defer unix.Close(root)
	how := func(fl uint64) *unix.OpenHow {
		return &unix.OpenHow{Flags: fl | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	}
	parts := strings.Split(rel, "/")
	opaque := false // a directory of the path is opaque: lower trees do not show it
	for n := 1; n <= len(parts); n++ {
		prefix := strings.Join(parts[:n], "/")
		fd, err := unix.Openat2(root, prefix, how(unix.O_PATH))
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil, false, opaque, nil
		}
		if err != nil {
			return nil, false, false, fmt.Errorf("opening /%s in layer tree %s: %w", prefix, tree, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, false, false, fmt.Errorf("stat of /%s in layer tree %s: %w", prefix, tree, err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0 {
			unix.Close(fd)
			return nil, false, true, nil
		}
		if n == len(parts) {
			f, err := reopen(fd, st, flags)
			if err != nil {
				return nil, false, false, fmt.Errorf("opening /%s in layer tree %s: %w", rel, tree, err)
			}
			return f, true, false, nil
		}
		opaque = opaque || isOpaque(fd)
		unix.Close(fd)
	}
	return nil, false, opaque, nil
}

// reopen turns fd, an O_PATH descriptor of a file with stat st, into a
// file opened with flags (fd itself for O_PATH). Only a regular file is
// opened for reading: a fifo or device would block or reach the host.
func reopen(fd int, st unix.Stat_t, flags uint64) (*os.File, error) {
	if flags == unix.O_PATH {
		return os.NewFile(uintptr(fd), "layer path"), nil
	}
	defer unix.Close(fd)
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("not a regular file (mode %#o)", st.Mode)
	}
	return os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", fd), int(flags)|unix.O_CLOEXEC, 0)
}

// isOpaque reports whether the directory fd (an O_PATH descriptor) is an
// overlay opaque directory, as the store marks them (trusted.* as root,
// user.* rootless).
func isOpaque(fd int) bool {
	buf := make([]byte, 1)
	for _, name := range []string{"trusted.overlay.opaque", "user.overlay.opaque"} {
		n, err := unix.Getxattr(fmt.Sprintf("/proc/self/fd/%d", fd), name, buf)
		if err == nil && n == 1 && buf[0] == 'y' {
			return true
		}
	}
	return false
}

// IsGitWorkTree reports whether dir, an absolute path in the root the
// trees make, holds a git repository of its own: a .git directory (a .git
// file pointing elsewhere is not one, as task sandboxes refuse it).
func IsGitWorkTree(trees []string, dir string) (bool, error) {
	f, ok, err := openIn(trees, strings.TrimSuffix(dir, "/")+"/.git", unix.O_PATH)
	if err != nil || !ok {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("stat of %s/.git: %w", dir, err)
	}
	return fi.IsDir(), nil
}

// readIn reads the file rel of the root the trees make ("" and no error
// when it has none).
func readIn(trees []string, rel string) (string, error) {
	f, ok, err := openIn(trees, rel, unix.O_RDONLY)
	if err != nil || !ok {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxAccountFile))
	if err != nil {
		return "", fmt.Errorf("reading /%s of the image: %w", rel, err)
	}
	return string(b), nil
}

// An Account is what an image's USER resolves to: the ids commands run
// as and the home directory of the user's /etc/passwd entry ("" when it
// has none, or no entry).
type Account struct {
	UID, GID int
	Home     string
}

// LookupUser resolves an image's USER (uid, uid:gid, name, name:group, or
// with a numeric group) to an Account, as podman does: names from the
// image's /etc/passwd and /etc/group; a uid's group is its passwd entry's
// primary group, else 0. A name the files lack is ErrNoUser.
func LookupUser(trees []string, u string) (Account, error) {
	user, group, hasGroup := strings.Cut(u, ":")
	passwd, err := readIn(trees, "etc/passwd")
	if err != nil {
		return Account{}, err
	}
	a := Account{UID: -1}
	if n, err := strconv.Atoi(user); err == nil && n >= 0 {
		a.UID = n
	}
	if e, ok := accountEntry(passwd, user, a.UID); ok {
		a = Account{UID: e.id, GID: max(e.primary, 0), Home: e.home}
	} else if a.UID < 0 {
		return Account{}, fmt.Errorf("%w: user %q is not in the image's /etc/passwd", ErrNoUser, user)
	}
	if !hasGroup {
		return a, nil
	}
	if n, err := strconv.Atoi(group); err == nil && n >= 0 {
		a.GID = n
		return a, nil
	}
	groups, err := readIn(trees, "etc/group")
	if err != nil {
		return Account{}, err
	}
	e, ok := accountEntry(groups, group, -1)
	if !ok {
		return Account{}, fmt.Errorf("%w: group %q is not in the image's /etc/group", ErrNoUser, group)
	}
	a.GID = e.id
	return a, nil
}

// HomeEnv is env with the HOME a user other than root gets when env has
// none, as podman and runc give it: the passwd entry's home directory,
// else "/" (runc's default for a uid without an entry). Root's HOME
// stays the sandbox's default, /root.
func (a Account) HomeEnv(env []string) []string {
	if a.UID == 0 || slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "HOME=") }) {
		return env
	}
	home := a.Home
	if home == "" {
		home = "/"
	}
	return append(slices.Clip(env), "HOME="+home)
}

// An entry is a line of a passwd or group file: its id and, for passwd,
// its primary group (-1 when the line has none) and home directory.
type entry struct {
	id, primary int
	home        string
}

// accountEntry finds the line of a passwd or group file for name (or for
// the numeric id, when id >= 0).
func accountEntry(file, name string, id int) (entry, bool) {
	for line := range strings.SplitSeq(file, "\n") {
		f := strings.Split(line, ":")
		if len(f) < 3 {
			continue
		}
		n, err := strconv.Atoi(f[2])
		if err != nil || f[0] != name && (id < 0 || n != id) {
			continue
		}
		e := entry{id: n, primary: -1}
		if len(f) > 3 {
			if g, err := strconv.Atoi(f[3]); err == nil {
				e.primary = g
			}
		}
		if len(f) > 5 {
			e.home = f[5]
		}
		return e, true
	}
	return entry{}, false
}
