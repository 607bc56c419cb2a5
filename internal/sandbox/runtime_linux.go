package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/minisandbox/msb/internal/cgroup"
	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// RuntimeOptions configure a Runtime; zero values pick the defaults.
type RuntimeOptions struct {
	// StateDir holds per-sandbox state; default DefaultStateDir("").
	StateDir string
	// CgroupParent is a directory in a cgroup subtree delegated to an
	// unprivileged user, v2 or v1 (MSB_CGROUP_PARENT; see cgroup.Detect).
	CgroupParent string
	// Exe is the binary started as the sandbox's init: default
	// msb-sandbox next to the running executable, else the running
	// executable itself (msb re-executes itself in that role).
	Exe string
	// DiskDir is a directory on a disk, default $MSB_DISK_DIR or /var/tmp,
	// whose msb-pool holds the disk pool of root-mode runtimes (see package
	// pool): made by the first runtime that needs it and kept for the next
	// ones.
	DiskDir string
	// DiskAdmitted says the caller admits sandboxes by their disk limits
	// (Limits.DiskBytes) and gives a sandbox's share back when its Close
	// returns (the engine's disk budget): Close then deletes the sandbox's
	// volume before it returns, instead of leaving that to the background
	// cleanup, so that a sandbox admitted next never shares the pool with
	// a volume whose share was given back.
	DiskAdmitted bool
	// NetSpares is how many network namespaces a root-mode runtime keeps
	// made ahead for its sandboxes whose network is "none" (see netPool),
	// from its first such sandbox on: for a caller that creates sandboxes
	// one after another (the engine), not one that creates one and exits.
	NetSpares int
	Logger    *slog.Logger
}

// Runtime creates sandboxes and cleans up after dead ones. Close it when
// done (after its sandboxes): it holds a disk pool and a user namespace.
type Runtime struct {
	stateDir string
	exe      string
	diskDir  string
	rootless bool
	syncDisk bool // RuntimeOptions.DiskAdmitted
	cg       cgroup.Info
	// cloneInto: each sandbox's init is cloned straight into its cgroup
	// (v2 and clone3), not moved there after its start.
	cloneInto bool
	// forkInside: each sandbox's init is forked from a thread that moved
	// itself into its cgroups for the fork (v1, root: cgroup.StartInside).
	forkInside bool
	shift      Shifter // SetShifter
	log        *slog.Logger
	empty      string // the lower layer of a root without layers: only mount points (makeMountPoints)
	// mnt holds root/ and disk/, where every sandbox's init mounts its
	// root and its disk, each in its own mount namespace: made once here,
	// no sandbox makes or removes a mount point of its own.
	mnt string

	// Made on first use, once: see disk and idmap.
	diskOnce  sync.Once
	diskSetup diskSetup
	idmapOnce sync.Once
	idmapNS   *os.File // user namespace of idmapped host dirs; nil: none
	idmapWhy  string   // why there is none
	nets      *netPool // RuntimeOptions.NetSpares; nil: none
	closed    atomic.Bool

	// Sandboxes' cleanups after Close (Sandbox.cleanup): bg counts those
	// running; once bgClosed, cleanLater runs them on the caller's path.
	bgMu     sync.Mutex // guards bgClosed, bgErrs, bgFailed and bg.Add
	bg       sync.WaitGroup
	bgClosed bool
	bgErrs   []error // the first maxCleanupErrs failures
	bgFailed int     // how many failed in all
}

// maxCleanupErrs bounds the cleanup failures a runtime keeps for Close.
const maxCleanupErrs = 16

// cleanLater runs s.cleanup in the background, or at once after Close.
func (rt *Runtime) cleanLater(s *Sandbox) {
	rt.bgMu.Lock()
	if rt.bgClosed {
		rt.bgMu.Unlock()
		s.cleanup()
		rt.cleaned(s)
		return
	}
	rt.bg.Add(1)
	rt.bgMu.Unlock()
	go func() {
		defer rt.bg.Done()
		s.cleanup()
		rt.cleaned(s)
	}()
}

// cleaned notes the outcome of s's cleanup.
func (rt *Runtime) cleaned(s *Sandbox) {
	if s.cleanupErr == nil {
		return
	}
	s.log.Warn("cleaning up after a closed sandbox", "err", s.cleanupErr)
	rt.bgMu.Lock()
	defer rt.bgMu.Unlock()
	if rt.bgFailed++; len(rt.bgErrs) < maxCleanupErrs {
		rt.bgErrs = append(rt.bgErrs, fmt.Errorf("sandbox %s: %w", s.ID, s.cleanupErr))
	}
}

// waitCleanups waits for the cleanups running in the background, stops
// more from starting there, and returns what they could not remove.
func (rt *Runtime) waitCleanups() error {
	rt.bgMu.Lock()
	rt.bgClosed = true
	rt.bgMu.Unlock()
	rt.bg.Wait()
	rt.bgMu.Lock()
	defer rt.bgMu.Unlock()
	errs := rt.bgErrs
	if n := rt.bgFailed - len(errs); n > 0 {
		errs = append(errs, fmt.Errorf("and %d more sandboxes' cleanups failed", n))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("cleaning up after closed sandboxes: %w", errors.Join(errs...))
}

// ErrRuntimeClosed is returned by Create after Close.
var ErrRuntimeClosed = errors.New("sandbox runtime is closed")

// Mode names how sandboxes are isolated.
func (rt *Runtime) Mode() string {
	if rt.rootless {
		return "rootless"
	}
	return "root"
}

// Rootless reports whether sandboxes run in a user namespace owned by an
// unprivileged caller.
func (rt *Runtime) Rootless() bool { return rt.rootless }

// StateDir is where sandboxes keep their state.
func (rt *Runtime) StateDir() string { return rt.stateDir }

// Cgroup says which cgroup hierarchy sandboxes use, if any.
func (rt *Runtime) Cgroup() cgroup.Info { return rt.cg }

// DefaultStateDir is the state directory for the calling user:
// /run/msb for root, else <runtimeDir>/msb (runtimeDir is the caller's
// $XDG_RUNTIME_DIR) or /tmp/msb-<uid> without one.
func DefaultStateDir(runtimeDir string) string {
	if os.Geteuid() == 0 {
		return "/run/msb"
	}
	if runtimeDir != "" {
		return filepath.Join(runtimeDir, "msb")
	}
	return filepath.Join("/tmp", "msb-"+strconv.Itoa(os.Geteuid()))
}

// DiskDirEnv names the default DiskDir: a disk pool elsewhere than
// /var/tmp, e.g. a test run's own, removed after it.
const DiskDirEnv = "MSB_DISK_DIR"

// NewRuntime prepares the state directory and detects cgroup support.
func NewRuntime(opts RuntimeOptions) (*Runtime, error) {
	rt := &Runtime{stateDir: opts.StateDir, exe: opts.Exe, diskDir: opts.DiskDir, rootless: os.Geteuid() != 0,
		syncDisk: opts.DiskAdmitted, log: opts.Logger}
	if rt.stateDir == "" {
		rt.stateDir = DefaultStateDir("")
	}
	if rt.diskDir == "" {
		rt.diskDir = cmp.Or(os.Getenv(DiskDirEnv), "/var/tmp")
	}
	if !filepath.IsAbs(rt.stateDir) {
		return nil, fmt.Errorf("state dir %q must be absolute", rt.stateDir)
	}
	if rt.exe == "" {
		exe, err := initExecutable()
		if err != nil {
			return nil, err
		}
		rt.exe = exe
	}
	if rt.log == nil {
		rt.log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(rt.stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating state dir: %w", err)
	}
	rt.empty = filepath.Join(rt.stateDir, ".empty")
	if err := makeMountPoints(rt.empty); err != nil {
		return nil, err
	}
	rt.mnt = filepath.Join(rt.stateDir, ".mnt")
	for _, d := range []string{"root", "disk"} {
		if err := os.MkdirAll(filepath.Join(rt.mnt, d), 0o755); err != nil {
			return nil, fmt.Errorf("creating the sandboxes' mount points: %w", err)
		}
	}
	rt.cg = cgroup.Detect(opts.CgroupParent)
	if rt.cg.WantsScope { // rootless, no MSB_CGROUP_PARENT, v2
		rt.joinSystemdScope()
	}
	if rt.cg.Usable() {
		// Made once here, not on every sandbox's start.
		if err := cgroup.PrepareParents(rt.cg); err != nil {
			return nil, err
		}
		rt.cloneInto = rt.cg.Version == cgroup.V2 && cgroup.CloneIntoSupported()
		rt.forkInside = rt.cg.Version == cgroup.V1 && !rt.rootless
	}
	if err := rt.SetNetSpares(opts.NetSpares); err != nil {
		return nil, err
	}
	return rt, nil
}

// SetNetSpares is RuntimeOptions.NetSpares for a runtime opened without
// it (the benchmark's, which measures sandboxes as the engine makes them),
// before its first sandbox. A rootless runtime keeps none: its sandboxes'
// network namespaces belong to their own user namespaces.
func (rt *Runtime) SetNetSpares(n int) error {
	if n <= 0 || rt.rootless || rt.nets != nil {
		return nil
	}
	p, err := newNetPool(n, sandboxIface(), rt.log)
	if err != nil {
		return err
	}
	rt.nets = p
	return nil
}

// joinSystemdScope moves this process into a systemd scope of its own,
// delegated to it, where the user has a systemd user manager, and detects
// the cgroup again: a rootless msb started from a login shell or a
// terminal's shell gets cgroup limits as under `systemd-run --user --scope
// -p Delegate=yes`. Where that fails the reason says why.
func (rt *Runtime) joinSystemdScope() {
	unit, err := cgroup.JoinSystemdScope(context.Background())
	switch {
	case errors.Is(err, cgroup.ErrNoSystemd):
		return
	case err != nil:
		rt.cg.Reason += "; no systemd scope either: " + err.Error()
		return
	}
	rt.cg = cgroup.Detect("")
	rt.log.Info("moved into a systemd scope of its own for cgroup limits", "unit", unit, "cgroup", rt.cg.Parents[""])
}

// makeMountPoints makes dir, the lower layer of sandboxes without layers,
// holding only what init mounts on in every host-base root: the default
// host dirs (as symlinks where they are symlinks on the host, as with a
// merged /usr), /proc, /sys, /dev and /tmp (mode 1777: a directory of the
// root in a sandbox with a disk, see sbinit's makeTmp). Made once here,
// init need not make them in each sandbox's upper dir.
func makeMountPoints(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	for _, d := range append([]string{"/proc", "/sys", "/dev", "/tmp"}, DefaultHostDirs...) {
		p := filepath.Join(dir, d)
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		var err error
		switch fi, lerr := os.Lstat(d); {
		case !slices.Contains(DefaultHostDirs, d) || lerr == nil && fi.IsDir():
			err = os.Mkdir(p, 0o755)
		case lerr == nil && fi.Mode()&os.ModeSymlink != 0:
			var link string
			if link, err = os.Readlink(d); err == nil {
				err = os.Symlink(link, p)
			}
		default:
			continue // not on this host, or not a dir: init deals with it
		}
		if err != nil && !errors.Is(err, os.ErrExist) { // another runtime of the state dir made it meanwhile
			return fmt.Errorf("making mount point %s in %s: %w", d, dir, err)
		}
	}
	// Past the umask, and in a state dir whose /tmp an msb made 0755
	// when /tmp was always a mount.
	if err := os.Chmod(filepath.Join(dir, "tmp"), 0o777|os.ModeSticky); err != nil {
		return fmt.Errorf("making %s/tmp mode 1777: %w", dir, err)
	}
	return nil
}

// InitBinary is the name of the small sandbox-side binary msb prefers.
const InitBinary = "msb-sandbox"

// initExecutable picks the sandbox's init: msb-sandbox next to this
// executable when there is one (it starts several times faster than the
// whole CLI), else this executable.
func initExecutable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the msb executable: %w", err)
	}
	side := filepath.Join(filepath.Dir(exe), InitBinary)
	if fi, err := os.Stat(side); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return side, nil
	}
	return exe, nil
}

// Exe is the binary started as each sandbox's init.
func (rt *Runtime) Exe() string { return rt.exe }

// Enforcement says, per limit, what enforces it in this runtime; a limit
// nothing enforces says so. HostFiles says what a sandbox can read in the
// host directories it sees.
type Enforcement struct {
	Memory    string `json:"memory"`
	Pids      string `json:"pids"`
	CPU       string `json:"cpu"`
	Tmp       string `json:"tmp"`
	Disk      string `json:"disk"`
	HostFiles string `json:"host_files"`
}

// Enforcement reports which limits hold and by what mechanism. It makes the
// runtime's disk pool and idmap namespace if they are not made yet.
func (rt *Runtime) Enforcement() Enforcement {
	const onRoot = "a directory of the root, within the disk limit; without a disk (a writable tree on the host): "
	e := Enforcement{Tmp: onRoot + "tmpfs of the tmp limit (at most the disk limit), charged to the sandbox's memory", Disk: rt.disk().describe()}
	if rt.memoryHoldsFiles() {
		e.Tmp = onRoot + "tmpfs of the tmp limit, at most the disk limit and half the memory limit: no cgroup counts tmpfs pages, " +
			"so the sandbox's tmpfs together stay within the memory limit (and hold one file per 8 KiB of their size)"
	}
	e.HostFiles = rt.hostFiles()
	if rt.cg.Usable() {
		by := "cgroup " + string(rt.cg.Version)
		e.Memory, e.Pids = by, by
		e.CPU = "not enforced (no cpu controller)"
		for _, c := range rt.cg.Controllers {
			if c == "cpu" {
				e.CPU = by
			}
		}
		return e
	}
	e.Memory = "rlimit AS, per process: each process may map up to the limit, so N processes can use N times it " +
		"(no cgroup: " + rt.cg.Reason + "); files in the sandbox's tmpfs count against the limit"
	e.Pids = "rlimit NPROC (processes of the sandbox's user namespace)"
	e.CPU = "not enforced (no cgroup)"
	return e
}

// memoryHoldsFiles reports whether no cgroup charges a sandbox's tmpfs
// pages to it: then the tmpfs sizes are bounded by the memory limit too.
func (rt *Runtime) memoryHoldsFiles() bool { return !rt.cg.Usable() }

// Close waits for the cleanups of closed sandboxes (see Sandbox.Close) and
// releases what the runtime holds for its sandboxes (the disk pool, the
// idmap user namespace); it returns what those cleanups could not remove.
// Close the sandboxes first: a pool's volumes cannot be removed after
// Close. Closing again does nothing.
func (rt *Runtime) Close() error {
	if rt.closed.Swap(true) {
		return nil // closed before
	}
	errs := []error{rt.waitCleanups()}
	rt.diskOnce.Do(func() {}) // nothing more is made after Close
	if p := rt.diskSetup.pool; p != nil {
		errs = append(errs, p.Close())
	}
	rt.idmapOnce.Do(func() {})
	if rt.idmapNS != nil {
		errs = append(errs, rt.idmapNS.Close())
	}
	if rt.nets != nil {
		errs = append(errs, rt.nets.close())
	}
	return errors.Join(errs...)
}

// rlimits are the fallback limits for a runtime without cgroups.
func (rt *Runtime) rlimits(l Limits) []wire.Rlimit {
	if rt.cg.Usable() {
		return nil
	}
	var out []wire.Rlimit
	if l.MemoryBytes > 0 {
		out = append(out, wire.Rlimit{Resource: unix.RLIMIT_AS, Name: "AS", Value: uint64(l.MemoryBytes)})
	}
	if l.Pids > 0 {
		out = append(out, wire.Rlimit{Resource: unix.RLIMIT_NPROC, Name: "NPROC", Value: uint64(l.Pids)})
	}
	return out
}
