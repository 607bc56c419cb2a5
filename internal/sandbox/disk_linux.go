package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/minisandbox/msb/internal/sandbox/pool"
	"github.com/minisandbox/msb/internal/sandbox/wire"
)

// A sandbox's disk is where its writable layer (the overlay's upper and
// work dirs) lives, which is what bounds what it writes.
type diskKind int

const (
	diskHost  diskKind = iota // a host directory: nothing bounds it
	diskPool                  // a volume of the runtime's btrfs pool (root mode)
	diskTmpfs                 // a tmpfs of the disk limit
)

// diskSetup is the runtime's answer, found once, to where bounded writable
// layers go.
type diskSetup struct {
	kind diskKind
	pool *pool.Pool
	why  string // why not the pool (root) or not a tmpfs (rootless)
	memo string // for a tmpfs: what bounds it besides its size
	// reclaimed are the volumes of dead owners deleted when the pool was
	// opened, until GC reports them.
	reclaimed *reclaimedVolumes
}

type reclaimedVolumes struct {
	mu    sync.Mutex // guards names
	names []string
}

// take returns the names and forgets them.
func (r *reclaimedVolumes) take() []string {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	names := r.names
	r.names = nil
	return names
}

// poolDir is where the runtime's disk pool lives: one for every runtime
// with this DiskDir.
func (rt *Runtime) poolDir() string { return filepath.Join(rt.diskDir, "msb-pool") }

// disk finds, the first time, how this runtime bounds writable layers: in
// root mode the host's disk pool (a btrfs filesystem with quota groups on a
// loop device, made by the first runtime that needs it and kept), else a
// tmpfs, which rootless sandboxes can mount (overlayfs takes a tmpfs upper
// dir in a user namespace from Linux 6.6, tmpfs having user xattrs).
func (rt *Runtime) disk() diskSetup {
	rt.diskOnce.Do(func() {
		d := &rt.diskSetup
		if !rt.rootless {
			p, err := pool.Open(pool.Options{Dir: rt.poolDir()})
			if err == nil {
				d.kind, d.pool = diskPool, p
				d.reclaimed = &reclaimedVolumes{names: rt.reclaim(p).Removed}
				return
			}
			d.why = err.Error()
			rt.log.Info("no disk pool: sandboxes' writable layers go to tmpfs", "err", err)
		}
		probe := rt.keptProbe("tmpfs-upper", func() Check {
			return rt.probe("tmpfs upper", "overlay", rt.probeUserns()|cloneNewNS, true, "", "MSB_PROBE_TMPFS=1")
		})
		if !probe.OK {
			d.why = appendWhy(d.why, "a tmpfs cannot be the overlay's upper dir here: "+probe.Detail)
			return
		}
		d.kind = diskTmpfs
		switch {
		case rt.memoryHoldsFiles():
			d.memo = "in RAM that no cgroup counts, so the memory limit bounds it too: a tmpfs of min(disk limit, memory limit)"
		default:
			d.memo = "in memory charged to the sandbox's cgroup (past the memory limit a write is an OOM kill, not ENOSPC)"
		}
	})
	return rt.diskSetup
}

// reclaim deletes the pool's volumes whose owners died (see pool.Reclaim):
// each runtime does it once, when it opens the pool, and Runtime.GC again.
func (rt *Runtime) reclaim(p *pool.Pool) pool.Reclaimed {
	r := p.Reclaim()
	if len(r.Removed)+len(r.Errors) > 0 {
		rt.log.Info("reclaimed disk volumes of dead owners", "volumes", r.Removed, "errors", r.Errors)
	}
	return r
}

func appendWhy(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// describe is Enforcement.Disk.
func (d diskSetup) describe() string {
	const callers = "; not for a writable tree the caller provides or keeps (Config.UpperDir, as environment builds use; " +
		"RootDir, copy mode; KeepUpper): those are host directories, bounded by nothing"
	switch d.kind {
	case diskPool:
		return "btrfs quota group of the sandbox's subvolume (writes past it fail with EDQUOT), in " + describePool(d.pool) +
			"; /dev/shm is a directory of the subvolume, within the limit together with the root (and /tmp, a directory of the root)" + callers
	case diskTmpfs:
		s := "tmpfs of the limit for the writable layer (/tmp among it) and /dev/shm together (ENOSPC past it), " + d.memo
		if d.why != "" {
			s += " (no disk pool: " + d.why + ")"
		}
		return s + callers
	}
	return "not enforced: writable layers are host directories (" + d.why + ")"
}

// describePool says where the pool is and what it holds.
func describePool(p *pool.Pool) string {
	st, err := p.Stats()
	if err != nil {
		return fmt.Sprintf("the pool in %s on %s (%v)", p.Dir(), p.Device(), err)
	}
	return fmt.Sprintf("the pool in %s on %s that every root-mode msb of this host shares: %.1f of %.1f GiB used, %d volumes",
		p.Dir(), p.Device(), float64(st.Used)/(1<<30), float64(st.Size)/(1<<30), st.Volumes)
}

// diskFor is where the writable layer of a sandbox with this config goes.
func (rt *Runtime) diskFor(c *Config) diskKind {
	if c.RootDir != "" || c.UpperDir != "" || c.KeepUpper {
		return diskHost
	}
	return rt.disk().kind
}

// prepareDisk makes the sandbox's bounded writable layer, when it has one,
// and says where init finds it.
func (s *Sandbox) prepareDisk(limits Limits) (*wire.Disk, error) {
	mnt := filepath.Join(s.rt.mnt, "disk") // in init's mount namespace only
	switch s.rt.diskFor(&s.conf) {
	case diskPool:
		v, err := s.rt.diskSetup.pool.Create(s.ID, limits.DiskBytes)
		if err != nil {
			return nil, err
		}
		s.volume = v
		for _, d := range []string{"upper", "work"} {
			if err := os.Mkdir(filepath.Join(v.Path(), d), 0o755); err != nil {
				return nil, fmt.Errorf("creating the sandbox's %s dir: %w", d, err)
			}
		}
		return &wire.Disk{Mount: mnt, Device: s.rt.diskSetup.pool.Device(), Subvol: v.Name()}, nil
	case diskTmpfs:
		return &wire.Disk{Mount: mnt, TmpfsBytes: diskTmpfsBytes(limits, s.rt.memoryHoldsFiles())}, nil
	}
	return nil, nil
}

// diskTmpfsBytes is the size of a sandbox's disk tmpfs, which holds its
// writable layer (/tmp among it) and /dev/shm: the disk limit, and where no cgroup
// charges tmpfs pages to the sandbox (memoryHoldsFiles), at most its memory
// limit too.
func diskTmpfsBytes(l Limits, memoryHoldsFiles bool) int64 {
	if memoryHoldsFiles {
		return min(l.DiskBytes, l.MemoryBytes)
	}
	return l.DiskBytes
}

// scratchSizes are the sizes of the tmpfs /tmp and /dev/shm of a sandbox
// without a disk of its own (its writable tree a host directory): never more
// than the disk limit, and, where no cgroup charges tmpfs pages to the
// sandbox (memoryHoldsFiles), both together within the memory limit: /tmp
// takes at most half of it. A sandbox with a disk has /dev/shm there and
// /tmp in its root, within the disk limit together.
func scratchSizes(l Limits, memoryHoldsFiles bool) (tmp, shm int64) {
	tmp, rest := min(l.TmpBytes, l.DiskBytes), l.DiskBytes
	if memoryHoldsFiles {
		tmp = min(tmp, l.MemoryBytes/2)
		rest = min(rest, l.MemoryBytes-tmp)
	}
	return tmp, min(shmBytes, rest)
}

// HasDiskPool reports whether the host's disk pool exists (mounted or
// not), without making one: what a one-shot check such as msb doctor
// reads first, so as to leave the host as it found it.
func (rt *Runtime) HasDiskPool() bool { return !rt.rootless && pool.Exists(rt.poolDir()) }

// ReleaseDiskPool unmounts and deletes the host's disk pool when no live
// sandbox has a volume in it (msb gc --disk-pool): the pool is kept
// between runs on purpose, so this is how a host gets rid of it.
// Orphaned volumes are reclaimed first. false with no error: there was no
// pool (rootless, or none made yet); pool.ErrBusy: sandboxes still use it.
// The cleanups of this runtime's closed sandboxes, which remove their
// volumes, are waited for first (later ones run on the closer's path, as
// after Close; Close reports their failures).
func (rt *Runtime) ReleaseDiskPool() (bool, error) {
	if !rt.HasDiskPool() {
		return false, nil
	}
	rt.waitCleanups()
	d := rt.disk()
	if d.pool == nil {
		return false, nil
	}
	if err := d.pool.Release(); err != nil {
		return false, fmt.Errorf("releasing the disk pool %s: %w", rt.poolDir(), err)
	}
	return true, nil
}
