package pool

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// newUserns makes a user namespace as msb's holder does: a process (cat,
// waiting on its stdin) in a new one, its namespace opened, and ended.
func newUserns() (*os.File, error) {
	cmd := exec.Command("cat")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	ids := []syscall.SysProcIDMap{{ContainerID: 4000000000, HostID: 4000000000, Size: 1}}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER, UidMappings: ids, GidMappings: ids}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ns, err := os.Open("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/user")
	in.Close()
	cmd.Wait()
	return ns, err
}

func inode(t *testing.T, f *os.File) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestUserns: a pool keeps one user namespace per name: the first Userns
// makes and binds it, later ones (other processes, after this one's file
// is closed) open the same namespace without making one; a file left
// unbound (as after a reboot) gets a new one; Destroy unbinds it. Without
// a pool nothing is made or bound: ErrUnavailable.
func TestUserns(t *testing.T) {
	dir := testDir(t)
	made := 0
	mk := func() (*os.File, error) { made++; return newUserns() }

	if _, err := Userns(dir, "a", mk); !errors.Is(err, ErrUnavailable) || made != 0 {
		t.Fatalf("Userns without a pool: %v (made %d), want ErrUnavailable and none made", err, made)
	}
	open(t, dir)
	first, err := Userns(dir, "a", mk)
	if err != nil || made != 1 {
		t.Fatalf("first Userns: %v (made %d)", err, made)
	}
	ino := inode(t, first)
	first.Close()
	again, err := Userns(dir, "a", mk)
	if err != nil || made != 1 {
		t.Fatalf("second Userns: %v (made %d), want the bound one", err, made)
	}
	if got := inode(t, again); got != ino {
		t.Errorf("second Userns opened namespace %d, want the bound %d", got, ino)
	}
	again.Close()

	// A file on which nothing is bound any more.
	if err := unix.Unmount(filepath.Join(dir, usernsPrefix+"a"), unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	fresh, err := Userns(dir, "a", mk)
	if err != nil || made != 2 {
		t.Fatalf("Userns over an unbound file: %v (made %d), want a new namespace", err, made)
	}
	if inode(t, fresh) == ino {
		t.Error("Userns over an unbound file returned the old namespace")
	}
	fresh.Close()

	if err := Destroy(dir); err != nil {
		t.Fatal(err)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mi), dir) {
		t.Errorf("mounts left in %s after Destroy:\n%s", dir, mi)
	}
}

// TestUsernsChecksWhatIsBound: what is bound there must be a user
// namespace: another kind (a network namespace) is not opened, and a user
// namespace is made and bound over it.
func TestUsernsChecksWhatIsBound(t *testing.T) {
	dir := testDir(t)
	open(t, dir)
	path := filepath.Join(dir, usernsPrefix+"b")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("/proc/self/ns/net", path, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	made := 0
	ns, err := Userns(dir, "b", func() (*os.File, error) { made++; return newUserns() })
	if err != nil || made != 1 {
		t.Fatalf("Userns over a network namespace: %v (made %d), want a user namespace made", err, made)
	}
	defer ns.Close()
	if typ, err := unix.IoctlRetInt(int(ns.Fd()), unix.NS_GET_NSTYPE); err != nil || typ != unix.CLONE_NEWUSER {
		t.Errorf("Userns returned a namespace of type %#x (%v), want a user namespace", typ, err)
	}
}

// TestUsernsUntrustedDir: nothing bound in a pool directory that anyone
// else can write into, or reached through a symlink, is trusted or made:
// ErrUnavailable, and the caller makes its own.
func TestUsernsUntrustedDir(t *testing.T) {
	dir := testDir(t)
	open(t, dir)
	made := 0
	mk := func() (*os.File, error) { made++; return newUserns() }
	ns, err := Userns(dir, "c", mk)
	if err != nil {
		t.Fatal(err)
	}
	ns.Close()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Userns(link, "c", mk); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Userns through a symlink to the pool dir: %v, want ErrUnavailable", err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	if _, err := Userns(dir, "c", mk); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Userns in a pool dir anyone can write into: %v, want ErrUnavailable", err)
	}
	if made != 1 {
		t.Errorf("made %d namespaces, want 1 (the first)", made)
	}
}
