package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
	"golang.org/x/sys/unix"
)

// TestUnmappedUsernsLetsHolderGo: making the idmap user namespace does not
// wait for the holder to read its stdin: a holder that never does (yes(1)
// ignores its stdin and writes forever) is killed once its namespace is
// open, and the namespace stays usable for an idmapped mount.
func TestUnmappedUsernsLetsHolderGo(t *testing.T) {
	privtest.RequireRoot(t)
	yes := "/usr/bin/yes"
	if _, err := os.Stat(yes); err != nil {
		privtest.Skip(t, "no %s (coreutils)", yes)
	}
	ns, err := newUnmappedUserns(yes) // waiting for the holder, it never returned
	if err != nil {
		t.Fatalf("newUnmappedUserns: %v", err)
	}
	defer ns.Close()
	if err := checkIdmap(t.TempDir(), ns); err != nil {
		t.Errorf("idmapped mount through the namespace of a killed holder: %v", err)
	}
}

// TestIdmapKeptWithPool: once the disk pool exists, the idmap namespace is
// kept with it: every runtime opens the one bound in the pool's directory
// (no holder each), and sandboxes bind the host dirs through it as before
// (their files owned by no id of the sandbox's).
func TestIdmapKeptWithPool(t *testing.T) {
	privtest.RequireRoot(t)
	first := testRuntime(t)
	mustOK(t, create(t, first, Config{HostBase: true, Limits: Limits{DiskBytes: 16 << 20}}), "true")
	if first.disk().kind != diskPool {
		privtest.Skip(t, "no disk pool here: %s", first.disk().why)
	}
	var inodes []uint64
	for range 2 {
		ns, why := testRuntime(t).idmap()
		if ns == nil {
			t.Fatalf("no idmap namespace: %s", why)
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(ns.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		inodes = append(inodes, st.Ino)
	}
	var bound unix.Stat_t
	if err := unix.Stat(filepath.Join(first.poolDir(), "userns-"+strconv.Itoa(unusedID)), &bound); err != nil {
		t.Fatalf("no namespace bound in the pool's directory: %v", err)
	}
	if inodes[0] != bound.Ino || inodes[1] != bound.Ino {
		t.Errorf("runtimes opened namespaces %v, want the bound %d", inodes, bound.Ino)
	}
	sb := create(t, testRuntime(t), Config{HostBase: true})
	if got := strings.TrimSpace(mustOK(t, sb, "stat -c %u /etc/passwd")); got != "65534" {
		t.Errorf("/etc/passwd owned by %s in the sandbox, want 65534 (no id mapped)", got)
	}
}
