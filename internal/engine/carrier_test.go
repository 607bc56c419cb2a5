package engine

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/privtest"
	"golang.org/x/sys/unix"
)

// TestSnapshotProcessesNoCarrier pauses (SnapshotProcesses, close) and
// resumes (Fork of the snapshot with processes "all") a sandbox whose eth0
// has lost its carrier, as an E2B sandbox's tap had: its routes are dumped
// flagged linkdown, which "ip route restore" refuses, and the resume must
// still restore the processes.
func TestSnapshotProcessesNoCarrier(t *testing.T) {
	e := snapshotEngine(t)
	if e.rt.Rootless() {
		return // TestSnapshotProcesses checks the refusal
	}
	if _, err := findCriu(); err != nil {
		privtest.Skip(t, "%v", err)
	}
	ctx := context.Background()
	parent := dumpableSandbox(t, e)
	if err := parent.OpenSession(ctx, api.SessionRequest{Name: "bg"}); err != nil {
		t.Fatal(err)
	}
	sh(t, parent, "bg", counterStart)
	token, before := readCounter(t, parent, 2)
	dropCarrier(t, parent.InitPid())
	if out := sh(t, parent, "", "cat /sys/class/net/eth0/carrier 2>&1 || true"); out != "0\n" {
		t.Fatalf("eth0's carrier after dropping it: %q, want 0", out)
	}
	if _, err := e.SnapshotProcesses(ctx, parent.ID(), api.SnapshotRequest{Name: "nocarrier"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.DeleteSnapshot("nocarrier") })
	if err := parent.Close(); err != nil {
		t.Fatal(err)
	}
	kids, err := e.Fork(ctx, "", api.ForkRequest{Snapshot: "nocarrier", Processes: api.ForkProcessesAll})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, kids...)
	if tok, n := readCounter(t, kids[0], before); tok != token {
		t.Errorf("the resumed counter: token %q at %d, want %q past %d", tok, n, token, before)
	}
}

// dropCarrier turns off the carrier of the tap device whose descriptor the
// process pid holds (TUNSETCARRIER on a copy of it).
func dropCarrier(t *testing.T, pid int) {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ents {
		if l, _ := os.Readlink(dir + "/" + d.Name()); l != "/dev/net/tun" {
			continue
		}
		n, _ := strconv.Atoi(d.Name())
		pfd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatal(err)
		}
		fd, err := unix.PidfdGetfd(pfd, n, 0)
		unix.Close(pfd)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if err := unix.IoctlSetPointerInt(fd, unix.TUNSETCARRIER, 0); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("process %d holds no tap device", pid)
}
