package server

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/client"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/socketdir"
)

// TestServerSocketDir: the daemon does not listen, and the client does
// not connect, in a socket directory others may write (mode 0777, or
// another user's), naming it; a missing directory is made private.
func TestServerSocketDir(t *testing.T) {
	base := t.TempDir()
	world := filepath.Join(base, "world")
	if err := os.Mkdir(world, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(world, 0o777)
	unsafe := []string{world}
	if os.Geteuid() == 0 {
		uid, gid := privtest.UserIDs(t)
		theirs := filepath.Join(base, "theirs")
		if err := os.Mkdir(theirs, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(theirs, uid, gid); err != nil {
			t.Fatal(err)
		}
		unsafe = append(unsafe, theirs)
	}
	for _, dir := range unsafe {
		sock := filepath.Join(dir, "msb.sock")
		if l, err := Listen("unix://"+sock, -1); !errors.Is(err, socketdir.ErrUnsafe) || !strings.Contains(err.Error(), dir) {
			if l != nil {
				l.Close()
			}
			t.Errorf("listening in %s: %v", dir, err)
		}
		if _, err := os.Stat(sock); err == nil {
			t.Errorf("a socket was made in %s", dir)
		}
		if _, err := client.New("unix://"+sock, ""); !errors.Is(err, socketdir.ErrUnsafe) || !strings.Contains(err.Error(), dir) {
			t.Errorf("a client of %s: %v", sock, err)
		}
	}
	fresh := filepath.Join(base, "fresh", "msb.sock")
	l, err := Listen("unix://"+fresh, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if fi, err := os.Stat(filepath.Dir(fresh)); err != nil || fi.Mode().Perm() != 0o700 && os.Geteuid() != 0 {
		t.Errorf("the socket directory made: %v %v", fi.Mode(), err)
	}
	if _, err := client.New("unix://"+fresh, ""); err != nil {
		t.Error(err)
	}
}
