package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox/pool"
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

// TestReleaseDiskPool: the disk pool, kept between runs, is released
// (unmounted, deleted) only when no live sandbox has a volume in it: with
// one running, pool.ErrBusy and the pool untouched; after it closed, gone,
// with no mount left; with no pool, nothing to do. A failed release
// unmounts the pool itself, so that the test leaves no mount.
func TestReleaseDiskPool(t *testing.T) {
	privtest.RequireRoot(t)
	diskDir := t.TempDir()
	t.Cleanup(func() { pool.Destroy(filepath.Join(diskDir, "msb-pool")) })
	runtime := func() *Runtime {
		rt, err := NewRuntime(RuntimeOptions{StateDir: t.TempDir(), DiskDir: diskDir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close() })
		return rt
	}
	owner := runtime()
	sb := create(t, owner, Config{HostBase: true, Limits: Limits{DiskBytes: 16 << 20}})
	mnt := filepath.Join(diskDir, "msb-pool", "mnt")
	if released, err := runtime().ReleaseDiskPool(); !errors.Is(err, pool.ErrBusy) || released {
		t.Fatalf("release with a sandbox running: %v %v, want pool.ErrBusy", released, err)
	}
	mustOK(t, sb, "echo still > /written")
	if !mounted(t, mnt) {
		t.Fatal("a busy pool was unmounted")
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	owner.Close() // its teardown, off Close's path, removes the volume
	if released, err := runtime().ReleaseDiskPool(); err != nil || !released {
		t.Fatalf("release of an unused pool: %v %v", released, err)
	}
	if mounted(t, mnt) {
		t.Fatal("the released pool is still mounted")
	}
	if _, err := os.Stat(filepath.Dir(mnt)); !os.IsNotExist(err) {
		t.Fatalf("the pool dir is left: %v", err)
	}
	if released, err := runtime().ReleaseDiskPool(); err != nil || released {
		t.Fatalf("release with no pool: %v %v", released, err)
	}
}

// mounted reports whether path is a mount point in this mount namespace.
func mounted(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

// TestKeptProbe: a probe's success is kept for the boot in the state dir,
// so a later runtime (a later process) does not run it again; a failure is
// not kept, and a success kept in another boot does not count.
func TestKeptProbe(t *testing.T) {
	dir := t.TempDir()
	runs := 0
	probe := func(ok bool) func() Check {
		return func() Check { runs++; return Check{OK: ok, Detail: "probed"} }
	}
	keep := func(ok bool) Check { return (&Runtime{stateDir: dir}).keptProbe("x", probe(ok)) }
	if c := keep(false); c.OK || runs != 1 {
		t.Fatalf("a failing probe: %+v after %d runs", c, runs)
	}
	if c := keep(true); !c.OK || runs != 2 {
		t.Fatalf("after a failure the probe runs again: %+v after %d runs", c, runs)
	}
	if c := keep(false); !c.OK || runs != 2 {
		t.Fatalf("a success kept for the boot: %+v after %d runs, want OK without a run", c, runs)
	}
	if err := os.WriteFile(filepath.Join(dir, ".probed-x"), []byte("another-boot\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c := keep(true); !c.OK || runs != 3 {
		t.Fatalf("a success kept in another boot: %+v after %d runs, want a new probe", c, runs)
	}
}
