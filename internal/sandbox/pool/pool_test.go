package pool

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Environment of the helper processes the tests start (see TestMain).
const (
	envHelper = "MSB_POOL_TEST_HELPER" // the pool dir
	envVolume = "MSB_POOL_TEST_VOLUME" // the volume the helper makes
)

// TestMain lets the test binary serve as a second process using a pool:
// it opens the pool, makes a volume of 16 MiB, writes 8 MiB into it, says
// "ok <device>" and waits for its stdin to close (or to be killed).
func TestMain(m *testing.M) {
	if dir := os.Getenv(envHelper); dir != "" {
		if err := helper(dir, os.Getenv(envVolume)); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func helper(dir, name string) error {
	p, err := Open(Options{Dir: dir, Size: 512 << 20})
	if err != nil {
		return err
	}
	defer p.Close()
	v, err := p.Create(name, 16<<20)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(v.Path(), "f"), make([]byte, 8<<20), 0o644); err != nil {
		return err
	}
	fmt.Println("ok", p.Device())
	bufio.NewReader(os.Stdin).ReadString('\n')
	return v.Remove()
}

// startHelper starts a helper making volume name in the pool dir and waits
// for its report; the test's cleanup ends it.
func startHelper(t *testing.T, dir, name string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command("/proc/self/exe", "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"="+dir, envVolume+"="+name)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	line, _ := bufio.NewReader(out).ReadString('\n')
	device, ok := strings.CutPrefix(strings.TrimSpace(line), "ok ")
	if !ok {
		t.Fatalf("helper for %s said %q", name, line)
	}
	return cmd, device
}

// testDir is a pool dir that the test's cleanup destroys.
func testDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("MSB_TEST_STRICT") == "1" {
			t.Fatal("pools need root, and MSB_TEST_STRICT is set")
		}
		t.Skip("pools need root")
	}
	dir := filepath.Join(t.TempDir(), "pool")
	t.Cleanup(func() {
		if err := Destroy(dir); err != nil {
			t.Error(err)
		}
		if left := attached(dir); len(left) > 0 {
			t.Errorf("loop devices still attached to the destroyed pool: %v", left)
		}
	})
	return dir
}

// attached lists the loop devices whose backing file is in dir, waiting a
// little for them to detach.
func attached(dir string) []string {
	var left []string
	for i := 0; i < 200; i++ {
		left = nil
		files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && strings.HasPrefix(string(b), dir+"/") {
				left = append(left, f)
			}
		}
		if len(left) == 0 {
			break
		}
		unix.Nanosleep(&unix.Timespec{Nsec: 10e6}, nil)
	}
	return left
}

func open(t *testing.T, dir string) *Pool {
	t.Helper()
	p, err := Open(Options{Dir: dir, Size: 512 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// writeLimit checks that a 16 MiB volume refuses 32 MiB and, once freed,
// takes 8 MiB again.
func writeLimit(t *testing.T, p *Pool, name string) {
	t.Helper()
	v, err := p.Create(name, 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(v.Path(), "f")
	err = os.WriteFile(f, make([]byte, 32<<20), 0o644)
	if !errors.Is(err, unix.EDQUOT) {
		t.Fatalf("writing 32 MiB into a 16 MiB volume: %v, want EDQUOT", err)
	}
	if err := os.Remove(f); err != nil {
		t.Fatal(err)
	}
	unix.Sync()
	if err := os.WriteFile(f, make([]byte, 8<<20), 0o644); err != nil {
		t.Fatalf("writing 8 MiB after freeing the volume: %v", err)
	}
	if err := v.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(v.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("volume still there after Remove: %v", err)
	}
}

func TestPool(t *testing.T) {
	dir := testDir(t)
	p := open(t, dir)
	writeLimit(t, p, "a")
	v, err := p.Create("b", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Create("b", 0); !errors.Is(err, ErrInUse) {
		t.Errorf("a second volume of the same name: %v, want ErrInUse", err)
	}
	if err := v.Remove(); err != nil {
		t.Fatal(err)
	}
	device := p.Device()
	p.Close()

	// The pool outlives the process's hold on it, and its limits hold
	// when it is opened again.
	again := open(t, dir)
	if again.Device() != device {
		t.Errorf("reopened pool on %s, want the same device %s", again.Device(), device)
	}
	writeLimit(t, again, "a")
	st, err := again.Stats()
	if err != nil || st.Volumes != 0 || st.Size < MinSize {
		t.Errorf("stats %+v (%v), want no volumes in a pool of at least %d bytes", st, err, MinSize)
	}
}

// TestRemount: a pool that is not mounted (after a reboot) is mounted
// again, with what its volumes held, instead of being made anew.
func TestRemount(t *testing.T) {
	dir := testDir(t)
	p := open(t, dir)
	v, err := p.Create("kept", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v.Path(), "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	unix.Close(v.owner) // as if this process had died
	p.Close()
	if err := unix.Unmount(filepath.Join(dir, mntName), 0); err != nil {
		t.Fatal(err)
	}
	if left := attached(dir); len(left) > 0 {
		t.Fatalf("the loop device stayed after the unmount: %v", left)
	}
	again := open(t, dir)
	b, err := os.ReadFile(filepath.Join(again.rootFdPath(), "kept", "f"))
	if err != nil || string(b) != "data" {
		t.Fatalf("the remounted pool holds %q (%v), want the volume's data", b, err)
	}
	if r := again.Reclaim(); !slices.Equal(r.Removed, []string{"kept"}) {
		t.Errorf("reclaimed %+v, want the volume whose owner is gone", r)
	}
}

func (p *Pool) rootFdPath() string { return fmt.Sprintf("/proc/self/fd/%d", p.rootFd) }

// TestShared: processes opening one pool at once (the first makes it) share
// it, each with its own bounded volume.
func TestShared(t *testing.T) {
	dir := testDir(t)
	devices := make([]string, 3)
	var wg sync.WaitGroup
	for i := range devices {
		wg.Go(func() {
			_, devices[i] = startHelper(t, dir, fmt.Sprintf("v%d", i))
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, d := range devices {
		if d != devices[0] {
			t.Fatalf("processes got pools on %v, want one device", devices)
		}
	}
	p := open(t, dir)
	writeLimit(t, p, "mine")
	st, err := p.Stats()
	if err != nil || st.Volumes != len(devices) {
		t.Errorf("stats %+v (%v), want the helpers' %d volumes", st, err, len(devices))
	}
	if r := p.Reclaim(); len(r.Removed)+len(r.Busy)+len(r.Errors) > 0 {
		t.Errorf("reclaim touched volumes of live owners: %+v", r)
	}
}

// TestReclaim: the volume of a process killed by SIGKILL is reclaimed by
// the next user; the volumes of live owners are left alone.
func TestReclaim(t *testing.T) {
	dir := testDir(t)
	killed, _ := startHelper(t, dir, "killed")
	startHelper(t, dir, "live")
	p := open(t, dir)
	mine, err := p.Create("mine", 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Reclaim(); len(r.Removed)+len(r.Busy)+len(r.Errors) > 0 {
		t.Fatalf("reclaim touched volumes of live owners: %+v", r)
	}
	killed.Process.Kill()
	killed.Wait()
	r := p.Reclaim()
	if !slices.Equal(r.Removed, []string{"killed"}) || len(r.Busy)+len(r.Errors) > 0 {
		t.Fatalf("reclaimed %+v, want the killed process's volume only", r)
	}
	names, _ := p.Volumes()
	slices.Sort(names)
	if !slices.Equal(names, []string{"live", "mine"}) {
		t.Errorf("volumes left %v, want live and mine", names)
	}
	owners, _ := readNames(p.owners)
	if slices.Contains(owners, "killed") {
		t.Errorf("the reclaimed volume's owner file is left: %v", owners)
	}
	if err := mine.Remove(); err != nil {
		t.Fatal(err)
	}
}

func TestBadVolumeName(t *testing.T) {
	p := &Pool{rootFd: -1, owners: -1}
	for _, name := range []string{"", ".", "..", ".owners", "a/b", strings.Repeat("x", 5000)} {
		if _, err := p.Create(name, 0); err == nil || !strings.Contains(err.Error(), "invalid volume name") {
			t.Errorf("Create(%q): %v, want an invalid-name error", name, err)
		}
	}
}

// TestUntrustedDir: a pool dir others can write into is refused.
func TestUntrustedDir(t *testing.T) {
	dir := testDir(t)
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	if _, err := Open(Options{Dir: dir, Size: 512 << 20}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open of a world-writable dir: %v, want ErrUnavailable", err)
	}
}

// BenchmarkVolume times what a sandbox's disk costs on an open pool: a
// volume with its limit made and removed.
func BenchmarkVolume(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("pools need root")
	}
	dir := filepath.Join(b.TempDir(), "pool")
	defer Destroy(dir)
	p, err := Open(Options{Dir: dir, Size: 512 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	for i := 0; b.Loop(); i++ {
		v, err := p.Create("v"+strconv.Itoa(i), 16<<20)
		if err != nil {
			b.Fatal(err)
		}
		if err := v.Remove(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpen times what a process pays to open the mounted pool (and
// reclaim nothing), once another made it.
func BenchmarkOpen(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("pools need root")
	}
	dir := filepath.Join(b.TempDir(), "pool")
	defer Destroy(dir)
	first, err := Open(Options{Dir: dir, Size: 512 << 20})
	if err != nil {
		b.Fatal(err)
	}
	first.Close()
	for b.Loop() {
		p, err := Open(Options{Dir: dir, Size: 512 << 20})
		if err != nil {
			b.Fatal(err)
		}
		p.Reclaim()
		p.Close()
	}
}

// TestRemountInUse: a pool unmounted while a sandbox still mounts a volume
// of it is mounted again from the same loop device, so that one
// filesystem, not two, writes the image.
func TestRemountInUse(t *testing.T) {
	dir := testDir(t)
	p := open(t, dir)
	v, err := p.Create("busy", 0)
	if err != nil {
		t.Fatal(err)
	}
	// What a sandbox's init does in its own namespace.
	sandbox := t.TempDir()
	if err := unix.Mount(p.Device(), sandbox, "btrfs", 0, "subvol=busy"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(sandbox, unix.MNT_DETACH)
	// Detached (umount -l): this process still holds the pool open.
	if err := unix.Unmount(filepath.Join(dir, mntName), unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	again := open(t, dir)
	if again.Device() != p.Device() {
		t.Fatalf("pool mounted again from %s while %s still holds it", again.Device(), p.Device())
	}
	if err := os.WriteFile(filepath.Join(again.rootFdPath(), "busy", "f"), []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(sandbox, "f")); err != nil || string(b) != "one" {
		t.Fatalf("the sandbox reads %q (%v), want what the reopened pool wrote", b, err)
	}
	if err := unix.Unmount(sandbox, 0); err != nil {
		t.Fatal(err)
	}
	if err := v.Remove(); err != nil {
		t.Fatal(err)
	}
}
