package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/minisandbox/msb/internal/socketdir"
)

// Listen opens a listener for addr: unix:///path (or a path with a
// slash) for a unix socket of mode 0600 (0660 with group >= 0, owned by
// that group), else host:port for TCP. A socket file left by a daemon that
// is gone is replaced; one a live daemon answers on is an error.
func Listen(addr string, group int) (net.Listener, error) {
	path, isUnix := SocketPath(addr)
	if !isUnix {
		hostport := strings.TrimPrefix(addr, "tcp://")
		l, err := net.Listen("tcp", hostport)
		if err != nil {
			return nil, fmt.Errorf("listening on %s: %w", hostport, err)
		}
		return l, nil
	}
	if err := socketDir(filepath.Dir(path), group); err != nil {
		return nil, err
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return nil, fmt.Errorf("%s: another msb serve answers on it", path)
	} else if errors.Is(err, syscall.ECONNREFUSED) {
		os.Remove(path) // left by a daemon that died
	}
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(true)
	if group >= 0 {
		if err := os.Chown(path, -1, group); err != nil {
			l.Close()
			return nil, err
		}
		if err := os.Chmod(path, 0o660); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// socketDir makes the socket's directory if missing (0700, or 0755 when
// a group shares the socket) and refuses one others could write, naming
// it (see socketdir). The default of a user without XDG_RUNTIME_DIR,
// /tmp/msb-<uid>, must be theirs with mode 0700: another user may have
// made it first.
func socketDir(dir string, group int) error {
	uid := os.Geteuid()
	mode := os.FileMode(0o700)
	if group >= 0 || uid == 0 {
		mode = 0o755
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return fmt.Errorf("creating the socket's directory: %w", err)
	}
	return socketdir.Check(dir, uid)
}

// SocketPath says whether addr names a unix socket, and its path.
func SocketPath(addr string) (string, bool) {
	if p, ok := strings.CutPrefix(addr, "unix://"); ok {
		return p, true
	}
	if strings.HasPrefix(addr, "/") || strings.HasPrefix(addr, "./") {
		return addr, true
	}
	return "", false
}

// shellQuote quotes s as one bash word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
