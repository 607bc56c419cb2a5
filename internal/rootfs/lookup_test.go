package rootfs

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestLookupUser resolves an image's USER in layer trees as an overlay of
// them shows /etc/passwd and /etc/group: the top tree's files win, an
// absolute symlink resolves inside its tree (never the host's), a whiteout
// in an upper tree hides a lower tree's file, and a name neither file has
// is ErrNoUser. The home directory is the passwd entry's, "" without one.
func TestLookupUser(t *testing.T) {
	lower, upper := t.TempDir(), t.TempDir()
	write(t, lower, "etc/passwd", "root:x:0:0::/root:/bin/sh\nold:x:500:500::/:/bin/sh\n")
	write(t, upper, "etc/accounts/passwd", "root:x:0:0::/root:/bin/sh\ncalc:x:1000:1001::/srv:/bin/sh\nnogroup:x:1002\nnohome:x:1003:1003:::/bin/sh\n")
	write(t, upper, "etc/group", "root:x:0:\nstaff:x:50:\n")
	// /etc/passwd in the upper tree is an absolute link: into that tree.
	if err := os.Symlink("/etc/accounts/passwd", filepath.Join(upper, "etc/passwd")); err != nil {
		t.Fatal(err)
	}
	trees := []string{lower, upper}
	for _, c := range []struct {
		user string
		want Account
	}{
		{"calc", Account{1000, 1001, "/srv"}}, {"1000", Account{1000, 1001, "/srv"}}, {"calc:staff", Account{1000, 50, "/srv"}},
		{"calc:7", Account{1000, 7, "/srv"}}, {"4242", Account{4242, 0, ""}}, {"4242:4243", Account{4242, 4243, ""}},
		{"nogroup", Account{1002, 0, ""}}, {"nohome", Account{1003, 1003, ""}}, {"root", Account{0, 0, "/root"}},
	} {
		a, err := LookupUser(trees, c.user)
		if err != nil || a != c.want {
			t.Errorf("LookupUser(%q) = %+v, %v; want %+v", c.user, a, err, c.want)
		}
	}
	for _, u := range []string{"old", "nobody", "calc:nogroup"} { // old: only in the lower tree's passwd
		if _, err := LookupUser(trees, u); !errors.Is(err, ErrNoUser) || !errors.Is(err, ErrImage) {
			t.Errorf("LookupUser(%q): %v, want ErrNoUser", u, err)
		}
	}
	// A whiteout hides the lower tree's passwd: names are unknown, uids numeric.
	top := t.TempDir()
	if err := os.MkdirAll(filepath.Join(top, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(top, "etc/passwd"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := LookupUser([]string{lower, top}, "old"); !errors.Is(err, ErrNoUser) {
		t.Errorf("a user of a whited-out passwd: %v", err)
	}
	if a, err := LookupUser([]string{lower, top}, "500"); err != nil || a != (Account{UID: 500}) {
		t.Errorf("a uid without a passwd: %+v %v", a, err)
	}
}

// TestHomeEnv: a user other than root without HOME in env gets its passwd
// home, else "/", as podman gives it; HOME in env and root's are kept.
func TestHomeEnv(t *testing.T) {
	for _, c := range []struct {
		a        Account
		env      []string
		wantHome string // "" for none added
	}{
		{Account{UID: 1000, Home: "/home/calc"}, []string{"PATH=/bin"}, "HOME=/home/calc"},
		{Account{UID: 1000}, nil, "HOME=/"},
		{Account{UID: 1000, Home: "/home/calc"}, []string{"HOME=/srv", "PATH=/bin"}, ""},
		{Account{UID: 0, GID: 50, Home: "/home/root"}, []string{"PATH=/bin"}, ""},
	} {
		got := c.a.HomeEnv(c.env)
		want := c.env
		if c.wantHome != "" {
			want = append(slices.Clone(c.env), c.wantHome)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%+v.HomeEnv(%q) = %q, want %q", c.a, c.env, got, want)
		}
	}
}

// TestIsGitWorkTree finds a repository's .git directory through the
// trees, topmost first: not through a whiteout of a directory above it,
// not below an opaque directory of an upper tree, not as a .git file, and
// never outside the tree through a symlink.
func TestIsGitWorkTree(t *testing.T) {
	lower, upper := t.TempDir(), t.TempDir()
	for _, d := range []string{"testbed/.git", "home/calc/.git", "work/gone/.git", "opaque/repo/.git"} {
		if err := os.MkdirAll(filepath.Join(lower, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, upper, "sub/.git", "gitdir: /elsewhere\n")
	if err := os.MkdirAll(filepath.Join(upper, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(upper, "work/gone"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(upper, "opaque"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(upper, "opaque"), "user.overlay.opaque", []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	host := t.TempDir() // a repository on the host that a link must not reach
	if err := os.MkdirAll(filepath.Join(host, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(host, filepath.Join(upper, "escape")); err != nil {
		t.Fatal(err)
	}
	trees := []string{lower, upper}
	for dir, want := range map[string]bool{
		"/testbed": true, "/home/calc/": true, "/work/gone": false, "/opaque/repo": false,
		"/sub": false, "/escape": false, "/nothing": false,
	} {
		if got, err := IsGitWorkTree(trees, dir); err != nil || got != want {
			t.Errorf("IsGitWorkTree(%s) = %v, %v; want %v", dir, got, err, want)
		}
	}
}

func write(t *testing.T, root, rel, body string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLookupRootless reruns the lookups as an unprivileged user.
func TestLookupRootless(t *testing.T) {
	privtest.Unprivileged(t, "^Test(LookupUser|IsGitWorkTree)$")
}
