// Package socketdir checks the directory of a daemon's unix socket before
// the daemon listens or a client connects there.
//
// A socket is only as private as its directory: whoever may write the
// directory can replace the socket with one of their own and read what
// clients send (requests on the socket are trusted, with no token). So
// the directory must be a real directory (not a symlink), owned by the
// user or root, and writable by nobody else, unless it is a shared,
// root-owned sticky directory like /tmp, where nobody can remove what
// another made. A private directory (the default /tmp/msb-<uid>) must be
// the user's own and mode 0700.
package socketdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ErrUnsafe: the socket's directory could be written by another user.
var ErrUnsafe = errors.New("unsafe socket directory")

// Private is the directory of a user's default socket when there is no
// XDG_RUNTIME_DIR: /tmp/msb-<uid>. Any user can make it first.
func Private(uid int) string { return fmt.Sprintf("/tmp/msb-%d", uid) }

// Check says whether dir is safe for uid's socket; Private(uid) must also
// be uid's own with mode 0700.
func Check(dir string, uid int) error {
	private := filepath.Clean(dir) == Private(uid)
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("checking the socket directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%w: %s is a symlink; remove it or name another socket", ErrUnsafe, dir)
	case !fi.IsDir() || !ok:
		return fmt.Errorf("%w: %s is not a directory", ErrUnsafe, dir)
	case private && (int(st.Uid) != uid || fi.Mode().Perm() != 0o700):
		return fmt.Errorf("%w: %s is owned by uid %d with mode %04o; it must be uid %d's with mode 0700 (remove it, or set XDG_RUNTIME_DIR)",
			ErrUnsafe, dir, st.Uid, fi.Mode().Perm(), uid)
	case int(st.Uid) != uid && st.Uid != 0:
		return fmt.Errorf("%w: %s is owned by uid %d, not by uid %d or root", ErrUnsafe, dir, st.Uid, uid)
	case fi.Mode().Perm()&0o022 != 0 && !(fi.Mode()&os.ModeSticky != 0 && st.Uid == 0):
		return fmt.Errorf("%w: %s has mode %04o: others may write it", ErrUnsafe, dir, fi.Mode().Perm())
	}
	return nil
}

// Default is the daemon's socket when none is named, where msb serve
// listens and the client verbs connect: /run/msb/msb.sock for root, else
// $XDG_RUNTIME_DIR/msb.sock (runtimeDir), else /tmp/msb-<uid>/msb.sock.
func Default(uid int, runtimeDir string) string {
	switch {
	case uid == 0:
		return "/run/msb/msb.sock"
	case runtimeDir != "":
		return filepath.Join(runtimeDir, "msb.sock")
	}
	return filepath.Join(Private(uid), "msb.sock")
}
