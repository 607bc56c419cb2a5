package socketdir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestCheck: directories of the test's own user, by mode and kind.
func TestCheck(t *testing.T) {
	uid := os.Geteuid()
	base := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(mk("target", 0o700), link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir  string
		safe bool
	}{
		{mk("private", 0o700), true},
		{mk("shared", 0o755), true},
		{mk("world", 0o777), false},
		{mk("group", 0o770), false},
		{mk("sticky-own", os.ModeSticky|0o777), uid == 0}, // sticky is enough only for a root-owned directory
		{link, false},
		{file, false},
	} {
		err := Check(tc.dir, uid)
		if tc.safe != (err == nil) || err != nil && (!errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), tc.dir)) {
			t.Errorf("%s: %v (want safe %v, unsafe naming the path)", tc.dir, err, tc.safe)
		}
	}
	if err := Check(filepath.Join(base, "missing"), uid); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
}

// TestCheckOtherUser: a directory another user made is refused, and the
// default /tmp/msb-<uid> must be the user's own with mode 0700 even when
// root made it.
func TestCheckOtherUser(t *testing.T) {
	privtest.RequireRoot(t)
	other, gid := privtest.UserIDs(t)
	base := t.TempDir()
	theirs := filepath.Join(base, "theirs")
	if err := os.Mkdir(theirs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, other, gid); err != nil {
		t.Fatal(err)
	}
	if err := Check(theirs, 0); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), theirs) {
		t.Errorf("root's socket in a directory of uid %d: %v", other, err)
	}
	if err := Check(base, other); err != nil { // root's 0700: root is trusted
		t.Errorf("uid %d's socket in root's directory: %v", other, err)
	}

	// The default directory of other, made by root (as another user
	// would make it first) with modes that a general check accepts.
	dir := Private(other)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Logf("%s exists already (%v): its cases are left out", dir, err)
		return
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, mode := range []os.FileMode{0o755, 0o777, 0o700} {
		os.Chmod(dir, mode)
		if err := Check(dir, other); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s made by root, mode %04o: %v", dir, mode, err)
		}
	}
	if err := os.Chown(dir, other, gid); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	if err := Check(dir, other); !errors.Is(err, ErrUnsafe) {
		t.Errorf("%s of uid %d with mode 0755: %v", dir, other, err)
	}
	os.Chmod(dir, 0o700)
	if err := Check(dir, other); err != nil {
		t.Errorf("%s of uid %d with mode 0700: %v", dir, other, err)
	}
}
