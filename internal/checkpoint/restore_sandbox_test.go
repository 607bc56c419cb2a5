package checkpoint

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/mount"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
)

// TestRestoreIntoManagedSandboxes freezes a sandbox whose session runs a
// counter that keeps a file of its upper dir open, copies its writes (the
// layer a fork's snapshot takes) and dumps its processes in that one
// freeze, thaws it, and restores the dump twice with sandbox.Runtime.
// Restore, over that layer: each restored sandbox is an ordinary Sandbox
// (Exec, its session, Close) whose counter goes on from the parent's
// number with the parent's token, isolated from the other and from the
// parent, which runs on. The suite's leak checks see what Close left.
func TestRestoreIntoManagedSandboxes(t *testing.T) {
	privtest.RequireRoot(t)
	criu := testCriu(t)
	for _, c := range []struct{ name, disk, network string }{
		{"pool", testDiskDir, sandbox.NetworkHost},
		{"tmpfs", "/proc/no-disk-pool", sandbox.NetworkHost},
		{"netns", testDiskDir, sandbox.NetworkNone},
	} {
		t.Run(c.name, func(t *testing.T) { testRestoreManaged(t, criu, c.disk, c.network) })
	}
}

func testRestoreManaged(t *testing.T, criu *Criu, diskDir, network string) {
	rt, state := newTestRuntime(t, diskDir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conf := sandbox.Config{HostBase: true, Network: network}
	parent := createDumpable(ctx, t, rt, conf)
	defer parent.Close()
	// The counter appends to /tmp/log, open all along: a restore reopens
	// it in the new root, which holds it as the freeze found it.
	const start = `setsid python3 -c '
import os, time
token, n = os.urandom(8).hex(), 0
log = open("/tmp/log", "a")
while True:
    n += 1
    log.write("%d\n" % n); log.flush()
    with open("/tmp/py.new", "w") as f:
        f.write("%s %d" % (token, n))
    os.rename("/tmp/py.new", "/tmp/py")
    time.sleep(0.02)
' </dev/null >/dev/null 2>&1 &`
	startCounter(ctx, t, parent, start)
	read := func(sb *sandbox.Sandbox, after int) counter { return readCounter(ctx, t, sb, "/tmp/py", after) }
	read(parent, 3)

	// dumpOf freezes sb, copies its writes (as a fork's snapshot takes
	// them: a layer) and dumps its processes in that one freeze, then
	// thaws it: the counter at the freeze, the layer, and the dump's
	// restorer.
	dumpOf := func(sb *sandbox.Sandbox) (counter, string, sandbox.Restorer) {
		t.Helper()
		upper, err := sb.WritableDir()
		if err != nil {
			t.Fatal(err)
		}
		upper = strings.Replace(upper, "/proc/self/", fmt.Sprintf("/proc/%d/", os.Getpid()), 1) // for cp
		layer, dir := t.TempDir(), t.TempDir()
		thaw, err := sb.Freeze(ctx)
		if err != nil {
			thaw()
			t.Fatal(err)
		}
		frozen, _ := os.ReadFile(filepath.Join(upper, "tmp", "py"))
		out, cerr := exec.Command("cp", "-a", upper+"/.", layer).CombinedOutput()
		var man *Manifest
		if cerr == nil {
			man, err = criu.DumpSandbox(ctx, sb, dir)
		}
		if terr := thaw(); terr != nil {
			t.Fatalf("thawing %s: %v", sb.ID, terr)
		}
		if cerr != nil {
			t.Fatalf("copying the writes of %s: %v: %s", sb.ID, cerr, out)
		}
		if err != nil {
			t.Fatal(err)
		}
		if man.Sandbox != sb.ID {
			t.Errorf("the manifest names sandbox %q, want %q", man.Sandbox, sb.ID)
		}
		if want := network == sandbox.NetworkNone; man.Netns != want {
			t.Errorf("the manifest of %s's dump says netns %v (left out), want %v", sb.ID, man.Netns, want)
		}
		at := parseCounter(t, string(frozen))
		t.Logf("%s dumped at %v: %d external mounts, %d external files", sb.ID, at, len(man.Mounts), len(man.Files))
		restorer, err := criu.Restorer(dir)
		if err != nil {
			t.Fatal(err)
		}
		return at, layer, restorer
	}
	at, layer, restorer := dumpOf(parent)
	cconf := conf
	cconf.Layers = []string{layer}
	var children []*sandbox.Sandbox
	for i := range 2 {
		c, err := rt.Restore(ctx, cconf, restorer)
		if err != nil {
			t.Fatalf("restore %d: %v", i, err)
		}
		children = append(children, c)
		defer c.Close()
	}
	for i, c := range children {
		got := read(c, at.n)
		if got.token != at.token {
			t.Errorf("child %d: the counter's token %q, want the parent's %q", i, got.token, at.token)
		}
		// The open log goes on where the freeze left it: its lines are
		// 1, 2, ... without a gap or a repeat.
		res, err := c.Exec(ctx, session.ExecRequest{Command: `awk 'NR != $1 { print "line " NR ": " $0; exit 1 }' /tmp/log`, Timeout: 10 * time.Second})
		if err != nil || res.ExitCode != 0 {
			t.Errorf("child %d: its /tmp/log is not 1, 2, ...: %v %+v", i, err, res)
		}
		// The parent's session goes on in the child.
		res, err = c.SessionExec(ctx, "bg", session.ExecRequest{Command: fmt.Sprintf("echo child > /tmp/mine-%d; jobs | wc -l", i), Timeout: 10 * time.Second})
		if err != nil || res.ExitCode != 0 {
			t.Errorf("child %d: its session bg: %v %+v", i, err, res)
		}
		if err := c.CanReset(); err != nil {
			t.Errorf("child %d: %v", i, err)
		}
	}
	for i, c := range children {
		for j, o := range append([]*sandbox.Sandbox{parent}, children...) {
			if o == c {
				continue
			}
			res, err := o.Exec(ctx, session.ExecRequest{Command: fmt.Sprintf("test -e /tmp/mine-%d", i), Timeout: 10 * time.Second})
			if err != nil || res.ExitCode == 0 {
				t.Errorf("child %d's write is seen by sandbox %d of (parent, children...): %v %+v", i, j, err, res)
			}
		}
	}
	if got := read(parent, at.n); got.token != at.token {
		t.Errorf("the parent's counter after the fork: %v, want token %q", got, at.token)
	}

	// A restored sandbox is dumped again like a created one: its
	// grandchild goes on with the counter from the child's number.
	at2, layer2, restorer2 := dumpOf(children[0])
	if at2.token != at.token || at2.n <= at.n {
		t.Errorf("child 0's counter at its dump: %v, want token %q past %d", at2, at.token, at.n)
	}
	gconf := conf
	gconf.Layers = []string{layer, layer2}
	grand, err := rt.Restore(ctx, gconf, restorer2)
	if err != nil {
		t.Fatalf("restoring child 0's dump: %v", err)
	}
	defer grand.Close()
	if got := read(grand, at2.n); got.token != at.token {
		t.Errorf("the grandchild's counter: token %q, want %q", got.token, at.token)
	}
	if res, err := grand.Exec(ctx, session.ExecRequest{Command: `awk 'NR != $1 { print "line " NR ": " $0; exit 1 }' /tmp/log; cat /tmp/mine-0`, Timeout: 10 * time.Second}); err != nil || res.ExitCode != 0 || !strings.HasSuffix(res.Output, "child\n") {
		t.Errorf("the grandchild's /tmp/log is not 1, 2, ... or it lacks child 0's /tmp/mine-0: %v %+v", err, res)
	}
	if err := CheckDumpable(grand); err != nil {
		t.Errorf("the grandchild cannot be dumped again: %v", err)
	}

	// A restored sandbox is reset in place: same init, the layer's
	// files (the counter as the parent's freeze left it), its own
	// write gone, and its root no longer mounted on the host.
	c := children[1]
	pid := c.InitPid()
	if err := c.Reset(ctx, sandbox.Deferred{Layers: cconf.Layers}); err != nil {
		t.Fatalf("resetting child 1 in place: %v", err)
	}
	res, err := c.Exec(ctx, session.ExecRequest{Command: "cat /tmp/py; echo; test -e /tmp/mine-1 && echo left; sleep 0.2; cat /tmp/py", Timeout: 10 * time.Second})
	if want := fmt.Sprintf("%s %d\n%s %d", at.token, at.n, at.token, at.n); err != nil || res.ExitCode != 0 || res.Output != want {
		t.Errorf("child 1 after its reset: %+v, %v; want %q (the layer's counter, still)", res, err, want)
	}
	if c.InitPid() != pid {
		t.Errorf("child 1's init after the reset: %d, want %d", c.InitPid(), pid)
	}
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), filepath.Join(state, c.ID, "root")) {
		t.Errorf("child 1's root is still mounted on the host after its reset")
	}
	children = append(children, grand)

	for i, c := range children {
		if err := c.Close(); err != nil {
			t.Errorf("closing child %d: %v", i, err)
		}
		<-c.Cleaned()
		if err := c.CleanupErr(); err != nil {
			t.Errorf("child %d's cleanup: %v", i, err)
		}
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		if strings.Contains(string(mi), filepath.Join(state, c.ID)) {
			t.Errorf("child %d's host mounts are left after its cleanup", i)
		}
		if c.Alive() {
			t.Errorf("child %d's init is alive after Close", i)
		}
	}
}

// TestTransientMounts: a dump beside a restore takes neither the
// restore's idmapped binds of host dirs nor anything in its work dir for
// where a sandbox's mount comes from (they go when the restore ends).
func TestTransientMounts(t *testing.T) {
	for _, c := range []struct {
		m    mount.Info
		want bool
	}{
		{mount.Info{Point: "/usr", Options: "ro,relatime"}, false},
		{mount.Info{Point: "/x/m0", Options: "ro,relatime,idmapped"}, true},
		{mount.Info{Point: filepath.Join(os.TempDir(), "msb-restore-123", "m0"), Options: "ro"}, true},
	} {
		if got := transient(c.m); got != c.want {
			t.Errorf("transient(%s, %q) = %v, want %v", c.m.Point, c.m.Options, got, c.want)
		}
	}
}
