package engine

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"golang.org/x/sys/unix"
)

// TestSnapshotProcessesNoCarrier pauses (SnapshotProcesses, close) and
// resumes (Fork of the snapshot with processes "all") a sandbox whose eth0
// has lost its carrier, as an E2B sandbox's tap had: a dump that held its
// namespace held its routes flagged linkdown, which "ip route restore"
// refuses; one that leaves it out (checkpoint.Manifest.Netns) restores
// into a new namespace with its carrier. Either way the resume must
// restore the processes.
func TestSnapshotProcessesNoCarrier(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	parent, token, before := counterParent(t, e)
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

// dropCarrier turns off the carrier of the tap device of process pid's
// network namespace (TUNSETCARRIER on a copy of a descriptor of it),
// which msb holds (a namespace made ahead) or pid (one init made).
func dropCarrier(t *testing.T, pid int) {
	t.Helper()
	var want unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/ns/net", &want); err != nil {
		t.Fatal(err)
	}
	for _, holder := range []int{os.Getpid(), pid} {
		dir := "/proc/" + strconv.Itoa(holder) + "/fd"
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ents {
			if l, _ := os.Readlink(dir + "/" + d.Name()); l != "/dev/net/tun" {
				continue
			}
			n, _ := strconv.Atoi(d.Name())
			pfd, err := unix.PidfdOpen(holder, 0)
			if err != nil {
				t.Fatal(err)
			}
			fd, err := unix.PidfdGetfd(pfd, n, 0)
			unix.Close(pfd)
			if err != nil {
				continue // closed meanwhile (another sandbox's)
			}
			if tapNetns(fd) != want.Ino {
				unix.Close(fd)
				continue
			}
			defer unix.Close(fd)
			if err := unix.IoctlSetPointerInt(fd, unix.TUNSETCARRIER, 0); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("neither msb nor process %d holds the tap of its network namespace", pid)
}

// tapNetns returns the inode of the network namespace of the tap device
// fd is attached to (TUNGETDEVNETNS), 0 if none.
func tapNetns(fd int) uint64 {
	const tunGetDevNetns = 0x54e3 // _IO('T', 227)
	ns, err := unix.IoctlRetInt(fd, tunGetDevNetns)
	if err != nil {
		return 0
	}
	defer unix.Close(ns)
	var st unix.Stat_t
	if unix.Fstat(ns, &st) != nil {
		return 0
	}
	return st.Ino
}
