package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/session"
	"golang.org/x/sys/unix"
)

// testUser (a suite case, so root and rootless) runs a sandbox's commands
// as uid and gid 1000: a rootless one through the caller's subordinate
// ids (TestRootless gives its user a range), 0 staying the caller. What
// the user makes is the user's; what the root has stays root's, but for
// the paths Config.Owners gives others: the user's home, a setuid file
// that stays setuid, a symlink (itself, not its target), /tmp (a
// directory of the root, which init makes where the layers have none);
// a path no layer has is left alone, and so is /tmp where it is a mount
// of init's own (no disk: a tmpfs).
func testUser(t *testing.T, rt *Runtime) {
	layer := t.TempDir()
	if err := os.MkdirAll(filepath.Join(layer, "home/app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(layer, "home/app/tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(layer, "home/app/tool"), os.ModeSetuid|0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(layer, "home/app/top")); err != nil {
		t.Fatal(err)
	}
	owners := []Owner{{"home/app", 1000, 1000}, {"home/app/tool", 1000, 50}, {"home/app/top", 7, 7},
		{"tmp", 1000, 1000}, {"no/such/path", 1000, 1000}}
	sb := create(t, rt, Config{HostBase: true, Layers: []string{layer}, User: User{UID: 1000, GID: 1000}, Owners: owners})
	got := mustOK(t, sb, "id -u; id -g; touch /tmp/f /home/app/new; stat -c '%n %u:%g %a' /tmp/f / /home/app /home/app/new /home/app/tool; "+
		"stat -c '%n %u:%g' /tmp /home/app/top; touch /f 2>/dev/null || echo denied")
	tmpOwner := "1000:1000"
	if rt.diskFor(&Config{}) == diskHost {
		tmpOwner = "0:0"
	}
	want := "1000\n1000\n/tmp/f 1000:1000 644\n/ 0:0 755\n/home/app 1000:1000 755\n/home/app/new 1000:1000 644\n" +
		"/home/app/tool 1000:50 4755\n/tmp " + tmpOwner + "\n/home/app/top 7:7\ndenied\n"
	if got != want {
		t.Fatalf("as user 1000: got\n%s\nwant\n%s", got, want)
	}
	// A file written for an owner has it, and its mode past the umask;
	// the file calls' entries carry the owners the sandbox sees.
	if err := sb.WriteFileAs(context.Background(), "/home/app/given", []byte("x"), 0o666, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	ents, err := sb.ListDir(context.Background(), "/home/app")
	if err != nil {
		t.Fatal(err)
	}
	var owned []string
	for _, e := range ents {
		owned = append(owned, fmt.Sprintf("%s %d:%d %o", e.Name, e.UID, e.GID, e.Mode&0o777))
	}
	slices.Sort(owned)
	want = "given 1000:1000 666, new 1000:1000 644, tool 1000:50 755, top 7:7 777"
	if got := strings.Join(owned, ", "); got != want {
		t.Errorf("ListDir /home/app: %s, want %s", got, want)
	}
	if !rt.rootless {
		return
	}
	// The namespace maps 0 to the caller and 1000 into its range; the host
	// sees the same map in init's /proc.
	uids, _, err := userMaps(User{UID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	m := mapLines(uids)
	if got := mustOK(t, sb, "cat /proc/self/uid_map"); normMap(got) != m {
		t.Errorf("uid_map inside: %q, want %q", got, m)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", sb.InitPid()))
	if err != nil || normMap(string(b)) != m {
		t.Errorf("init's uid_map from the host: %q (%v), want %q", b, err, m)
	}
}

// mapLines is newuidmap's arguments as uid_map's lines, fields
// separated by one space.
func mapLines(args []string) string {
	var lines []string
	for i := 0; i+2 < len(args); i += 3 {
		lines = append(lines, strings.Join(args[i:i+3], " "))
	}
	return strings.Join(lines, "\n")
}

func normMap(m string) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(m), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(lines, "\n")
}

// TestRootlessOwnersNeedUser: a rootless sandbox that runs as root maps
// only the caller, so it leaves Config.Owners alone (root mode gives them).
func TestRootlessOwnersNeedUser(t *testing.T) {
	layer := t.TempDir()
	if err := os.Mkdir(filepath.Join(layer, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	rt := testRuntime(t)
	sb := create(t, rt, Config{HostBase: true, Layers: []string{layer}, Owners: []Owner{{"d", 5, 5}}})
	want := "5:5\n"
	if rt.rootless {
		want = "0:0\n"
	}
	if got := mustOK(t, sb, "stat -c %u:%g /d"); got != want {
		t.Errorf("/d: %q, want %q", got, want)
	}
}

// TestRootlessUserWithoutSubIDs: a rootless sandbox whose user is not root,
// for a caller without a subordinate range, is refused before anything
// starts, with ErrNoSubIDs naming the file that lacks it; one with a
// range too small for the uid likewise. (TestRootless reruns it.)
func TestRootlessUserWithoutSubIDs(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root maps every user: TestRootless reruns this as an unprivileged user")
	}
	dir := t.TempDir()
	empty, small := filepath.Join(dir, "subuid"), filepath.Join(dir, "subuid-small")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(small, []byte(strconv.Itoa(os.Geteuid())+":100000:10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rt := testRuntime(t)
	for _, file := range []string{empty, small} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			old := subUIDFile
			subUIDFile = file
			defer func() { subUIDFile = old }()
			sb, err := rt.Create(t.Context(), Config{HostBase: true, User: User{UID: 1000, GID: 1000}})
			if err == nil {
				sb.Close()
				t.Fatal("created a sandbox for uid 1000 without subordinate uids")
			}
			if !errors.Is(err, ErrNoSubIDs) || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), file) {
				t.Fatalf("got %v, want ErrNoSubIDs naming %s", err, file)
			}
		})
	}
}

// TestRootlessUserNeedsOwnLayer: a rootless sandbox's user other than root
// is refused on a host directory as its writable layer, whose files of
// subordinate ids the caller could not remove; root mode takes it.
func TestRootlessUserNeedsOwnLayer(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []Config{
		{HostBase: true, User: User{UID: 1000}, UpperDir: dir},
		{HostBase: true, User: User{GID: 1000}, KeepUpper: true},
		{RootDir: dir, User: User{UID: 1000}},
	} {
		if err := c.Validate(true); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("rootless %+v: got %v, want ErrInvalidConfig", c, err)
		}
		if err := c.Validate(false); err != nil {
			t.Errorf("root mode %+v: %v", c, err)
		}
	}
}

// helperHoldUser names the helper of testUserHostKilled (TestMain runs it).
const helperHoldUser = "hold-user-sandbox"

// holdUserSandbox is that helper: it makes a sandbox that runs as uid
// 1000, starts a command there that runs until it is killed, prints init's
// pid once the command runs, and waits to be killed.
func holdUserSandbox() error {
	rt, err := NewRuntime(RuntimeOptions{StateDir: os.Getenv(envHelperState), DiskDir: os.Getenv(envHelperDisk)})
	if err != nil {
		return err
	}
	ctx := context.Background()
	sb, err := rt.Create(ctx, Config{HostBase: true, User: User{UID: 1000, GID: 1000}})
	if err != nil {
		return err
	}
	fifo := "/tmp/started"
	go sb.Exec(ctx, session.ExecRequest{Command: "mkfifo " + fifo + " && echo > " + fifo + " && exec sleep infinity", Timeout: time.Hour})
	// Reading the fifo ends once the command has written to it.
	if _, err := sb.Exec(ctx, session.ExecRequest{Command: "until [ -p " + fifo + " ]; do sleep 0.01; done; cat " + fifo, Timeout: time.Minute}); err != nil {
		return err
	}
	fmt.Println(sb.InitPid())
	select {}
}

// testUserHostKilled: a sandbox whose user is not root dies with the msb
// that made it, killed with SIGKILL, as a root sandbox does (switching to
// the user cleared the parent-death signal, and the sandbox lived on).
func testUserHostKilled(t *testing.T, _ *Runtime) {
	rt := testRuntime(t)
	cmd := exec.Command("/proc/self/exe", "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"="+helperHoldUser, envHelperState+"="+rt.StateDir(), envHelperDisk+"="+testDiskDir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper said %q (%v)", line, err)
	}
	init, err := unix.PidfdOpen(pid, 0)
	cmd.Process.Kill()
	cmd.Wait()
	if err != nil {
		t.Fatalf("pidfd of init %d: %v", pid, err)
	}
	defer unix.Close(init)
	fds := []unix.PollFd{{Fd: int32(init), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 10_000)
	for deadline := time.Now().Add(10 * time.Second); errors.Is(err, unix.EINTR) && time.Now().Before(deadline); {
		n, err = unix.Poll(fds, int(time.Until(deadline).Milliseconds())+1) // a signal of the runtime's (preemption) came first
	}
	if n != 1 || err != nil {
		unix.PidfdSendSignal(init, unix.SIGKILL, nil, 0)
		t.Errorf("the sandbox's init %d outlived its msb (poll: %d, %v)", pid, n, err)
	}
	if gc := rt.GC(); len(gc.Sandboxes) != 1 || len(gc.Errors) > 0 {
		t.Errorf("gc after the killed msb: %+v, want its one sandbox", gc)
	}
}

// TestUserCheck: msb doctor's line on sandbox users: any in root mode;
// rootless (TestRootless reruns it), the subordinate range's ids, or root
// only, not OK but not required, with the fix, without a range; without
// nsenter (a PATH holding only newuidmap and newgidmap), not OK, naming
// the snapshots it fails and util-linux as the fix.
func TestUserCheck(t *testing.T) {
	rt := testRuntime(t)
	c := rt.userCheck()
	if c.Required {
		t.Errorf("sandbox users must not be required: %+v", c)
	}
	if !rt.rootless {
		if !c.OK {
			t.Errorf("root mode: %+v", c)
		}
		return
	}
	if !c.OK || !strings.Contains(c.Detail, "uids 1-") || !strings.Contains(c.Detail, "nsenter") {
		t.Errorf("rootless with a subordinate range: %+v", c)
	}
	bin := t.TempDir()
	for _, name := range []string{"newuidmap", "newgidmap"} {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin)
	c = rt.userCheck()
	if c.OK || c.Required || !strings.Contains(c.Detail, "uids 1-") || !strings.Contains(c.Detail, "snapshots") ||
		!strings.Contains(c.Fix, "util-linux") {
		t.Errorf("rootless without nsenter: %+v", c)
	}
	old := subUIDFile
	subUIDFile = filepath.Join(t.TempDir(), "subuid")
	defer func() { subUIDFile = old }()
	c = rt.userCheck()
	if c.OK || !strings.Contains(c.Detail, subUIDFile) || !strings.Contains(c.Fix, "usermod --add-subuids") {
		t.Errorf("rootless without a range: %+v", c)
	}
}
