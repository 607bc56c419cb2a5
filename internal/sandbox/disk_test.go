package sandbox

import (
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestDiskPoolShared: runtimes share the host's disk pool at once (a
// runtime that opens it after another made it reuses it), each sandbox
// bounded by its own limit, and msb doctor names the pool.
func TestDiskPoolShared(t *testing.T) {
	privtest.RequireRoot(t)
	first, second := testRuntime(t), testRuntime(t)
	a := create(t, first, Config{HostBase: true, Limits: Limits{DiskBytes: 32 << 20}})
	b := create(t, second, Config{HostBase: true, Limits: Limits{DiskBytes: 32 << 20}})
	if first.disk().kind != diskPool || second.disk().pool.Device() != first.disk().pool.Device() {
		t.Fatalf("runtimes on disks %q and %q, want one pool", first.Enforcement().Disk, second.Enforcement().Disk)
	}
	for _, sb := range []*Sandbox{a, b} {
		mustOK(t, sb, "dd if=/dev/zero of=/a bs=1M count=24 2>&1")
	}
	for _, sb := range []*Sandbox{a, b} {
		if out := mustFail(t, sb, "dd if=/dev/zero of=/b bs=1M count=24 2>&1"); !strings.Contains(out, "Disk quota exceeded") {
			t.Fatalf("48 MiB into a 32 MiB disk: %q, want EDQUOT", out)
		}
	}
	c := second.diskCheck()
	if !c.OK || !strings.Contains(c.Detail, second.poolDir()+" on "+second.disk().pool.Device()) || !strings.Contains(c.Detail, "2 volumes") {
		t.Errorf("doctor's disk check %+v, want the pool and its 2 volumes named", c)
	}
}

func TestScratchSizes(t *testing.T) {
	const mi = 1 << 20
	for _, tc := range []struct {
		name             string
		l                Limits
		memoryHoldsFiles bool
		wantTmp, wantShm int64
	}{
		{"defaults with a cgroup", DefaultLimits, false, 1 << 30, shmBytes},
		{"tmp and shm capped by disk", Limits{MemoryBytes: 4 << 30, TmpBytes: 1 << 30, DiskBytes: 32 * mi}, false, 32 * mi, 32 * mi},
		{"defaults without a cgroup", DefaultLimits, true, 1 << 30, shmBytes},
		{"small memory without a cgroup", Limits{MemoryBytes: 96 * mi, TmpBytes: 1 << 30, DiskBytes: 10 << 30}, true, 48 * mi, 48 * mi},
		{"small tmp without a cgroup", Limits{MemoryBytes: 256 * mi, TmpBytes: 8 * mi, DiskBytes: 10 << 30}, true, 8 * mi, shmBytes},
		{"small disk without a cgroup", Limits{MemoryBytes: 4 << 30, TmpBytes: 1 << 30, DiskBytes: 32 * mi}, true, 32 * mi, 32 * mi},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp, shm := scratchSizes(tc.l, tc.memoryHoldsFiles)
			if tmp != tc.wantTmp || shm != tc.wantShm {
				t.Fatalf("scratchSizes = %d MiB, %d MiB; want %d MiB, %d MiB", tmp/mi, shm/mi, tc.wantTmp/mi, tc.wantShm/mi)
			}
			if tc.memoryHoldsFiles && tmp+shm > tc.l.MemoryBytes {
				t.Fatalf("the tmpfs hold %d bytes together, over the memory limit %d", tmp+shm, tc.l.MemoryBytes)
			}
		})
	}
}

func TestDiskTmpfsBytes(t *testing.T) {
	l := Limits{MemoryBytes: 256 << 20, DiskBytes: 1 << 30}
	if got := diskTmpfsBytes(l, false); got != l.DiskBytes {
		t.Fatalf("with a cgroup: %d, want the disk limit %d", got, l.DiskBytes)
	}
	if got := diskTmpfsBytes(l, true); got != l.MemoryBytes {
		t.Fatalf("without a cgroup: %d, want the memory limit %d", got, l.MemoryBytes)
	}
}
