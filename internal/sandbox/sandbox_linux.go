package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/minisandbox/msb/internal/cgroup"
	"github.com/minisandbox/msb/internal/envlist"
	"github.com/minisandbox/msb/internal/sandbox/pool"
	"github.com/minisandbox/msb/internal/sandbox/sbinit"
	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// Sandbox is a running sandbox.
type Sandbox struct {
	ID   string
	rt   *Runtime
	conf Config
	// confMu guards conf's layers and owners, which Reset replaces, for
	// Config.
	confMu sync.Mutex
	log    *slog.Logger

	dir      string // state dir
	upper    string // host path of the upper dir; "" when it has none (a bounded disk)
	work     string
	ownUpper bool         // upper was made for this sandbox
	umap     *userMap     // rootless with a user other than root: see planUserMap
	volume   *pool.Volume // the bounded disk, in root mode
	diskFd   int          // init's descriptor of its disk tmpfs (see WritableDir); 0: none
	lock     *os.File
	mountNS  *os.File // init's mount namespace, held: see holdMounts
	cmd      *exec.Cmd
	waitDone chan struct{}
	cg       *cgroup.Group
	conn     *conn
	fwd      *forwarder  // the network forwarder of a filtered sandbox
	stderr   *tailBuffer // the end of what init and the supervisor wrote to stderr
	stdio    *relays     // copies between Config.Stdio and the sandbox's pipes
	// childEnds are this process's copies of init's stdio pipe ends,
	// closed once init started.
	childEnds []*os.File
	// resetDisk is the disk tmpfs of a rootless sandbox's last reset
	// (putRootInNS), under confMu: it replaces diskFd's for WritableDir.
	resetDisk *os.File
	// tap is the tap device of the interface of a network namespace made
	// ahead (readyNet.tap), held for the sandbox's life: while it is
	// open the device has its carrier. msb holds it, not init, so that
	// no process of the sandbox holds a tap and a dump can leave the
	// namespace out (package checkpoint, Manifest.Netns).
	tap *os.File

	closeOnce sync.Once
	closeErr  error
	// ended: the supervisor answered shutdown, so every process but init
	// is gone and init, exiting, holds no stdio pipe (see Close).
	ended bool
	times timings
	// later, when not nil, gives the layers and owners (CreateDeferred)
	// while init starts; deferred is what it gave.
	later    func(context.Context) (Deferred, error)
	deferred Deferred
	// cleaned is closed when cleanup is done; cleanupErr is its outcome.
	cleaned    chan struct{}
	cleanupErr error
	// restored: its processes came from a dump (Runtime.Restore), and
	// hostMounts are its disk and root, mounted on the host, which
	// releaseMounts unmounts.
	restored   bool
	hostMounts []string
}

// stateInfo is written to <state>/<id>/info.json for gc. InitStart is the
// init's start time (clock ticks after boot, /proc/<pid>/stat): with the pid
// it names one process for the life of the host, so a reused pid is not
// taken for the init.
type stateInfo struct {
	InitPid    int       `json:"init_pid"`
	InitStart  uint64    `json:"init_start,omitempty"`
	CgroupDirs []string  `json:"cgroup_dirs,omitempty"`
	Created    time.Time `json:"created"`
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Create builds and starts a sandbox. On error nothing is left behind.
func (rt *Runtime) Create(ctx context.Context, cfg Config) (*Sandbox, error) {
	return rt.create(ctx, cfg, nil)
}

// create is Create, with the root's parts from later when it is not nil
// (CreateDeferred), validated once they came.
func (rt *Runtime) create(ctx context.Context, cfg Config, later func(context.Context) (Deferred, error)) (*Sandbox, error) {
	if rt.closed.Load() {
		return nil, ErrRuntimeClosed
	}
	validate := cfg.Validate
	if later != nil {
		validate = cfg.validateRest
	}
	if err := validate(rt.rootless); err != nil {
		return nil, err
	}
	s := &Sandbox{ID: newID(), rt: rt, conf: cfg, later: later, cleaned: make(chan struct{})}
	s.log = rt.log.With("sandbox", s.ID)
	start := time.Now()
	if err := s.start(ctx); err != nil {
		s.teardown()
		s.log.Debug("sandbox failed to start", "err", err)
		return nil, fmt.Errorf("creating sandbox %s: %w", s.ID, err)
	}
	s.times.since(PhaseCreate, start)
	s.log.Debug("sandbox up", "init_pid", s.cmd.Process.Pid, "took", time.Since(start))
	return s, nil
}

// Deferred are the parts of a sandbox's config that CreateDeferred
// waits for while the sandbox's init starts: what its root is made of.
type Deferred struct {
	Layers []string // Config.Layers
	Owners []Owner  // Config.Owners
	// Mount, when not nil, are the paths Layers are mounted from now, one
	// each (see mountPaths).
	Mount []string
}

// errDeferred marks an error of CreateDeferred's later, or of what it
// gave: init, which waits for its config, has nothing to say about it.
type errDeferred struct{ err error }

func (e errDeferred) Error() string { return e.err.Error() }
func (e errDeferred) Unwrap() error { return e.err }

// CreateDeferred is Create for a config whose layers and owners are not
// known yet (cfg has none): a fork's children, whose layers are the
// snapshot being taken of their parent. The sandbox's state dir, disk,
// cgroups and init (its namespaces, its runtime's start, the cgroup v1
// attach) are made at once, and init builds the root once later returns
// cfg.Layers and cfg.Owners; the sandbox's Config has them. On an error
// of later the sandbox is gone and Create's error wraps later's.
func (rt *Runtime) CreateDeferred(ctx context.Context, cfg Config, later func(context.Context) (Deferred, error)) (*Sandbox, error) {
	if len(cfg.Layers) > 0 || cfg.RootDir != "" || len(cfg.Owners) > 0 {
		return nil, invalid("a deferred config has no layers, root dir or owners of its own: later gives them")
	}
	return rt.create(ctx, cfg, later)
}

func (s *Sandbox) start(ctx context.Context) error {
	if s.conf.HostBase && !s.rt.rootless && !s.conf.HostReadAsRoot {
		// The idmap namespace (opened once per runtime: kept with the disk
		// pool, made by a holder where there is none yet) is opened while
		// the state dir and the disk are made; config waits for it.
		go s.rt.idmap()
	}
	t := time.Now()
	if err := s.prepareDirs(); err != nil {
		return err
	}
	t = s.times.since(PhaseDirs, t)
	limits := s.conf.Limits.withDefaults()
	if err := s.rt.checkCgroupLimits(limits); err != nil {
		return err
	}
	// The cgroup is made beside the disk volume (each ~0.1 ms, on
	// different filesystems), both before config, which waits for the
	// idmap namespace's holder. s.cg is set once made, so that teardown
	// removes it whichever failed.
	var cgMade chan error
	if s.rt.cg.Usable() {
		cgMade = make(chan error, 1)
		go func() {
			t := time.Now()
			err := s.makeCgroup(limits)
			if err == nil {
				s.times.since(PhaseCgroup, t)
			}
			cgMade <- err
		}()
	}
	disk, err := s.prepareDisk(limits)
	if disk != nil && err == nil {
		s.times.since(PhaseDisk, t)
	}
	if cgMade != nil {
		if cgErr := <-cgMade; err == nil {
			err = cgErr
		}
	}
	if err != nil {
		return err
	}
	t = time.Now()
	wcfg, err := s.config(limits, disk)
	if err != nil {
		return err
	}
	if s.cg != nil {
		wcfg.Cgroup = s.rt.cgroupFS(s.cg)
	}
	t = s.times.since(PhaseConfig, t)
	if s.umap, err = s.planUserMap(); err != nil {
		return err
	}
	defer s.umap.close()
	ownersToInit := !s.rt.rootless || s.umap != nil
	if ownersToInit && s.later == nil {
		var owners []Owner
		wcfg.Lowers, owners = s.shifted(ctx, wcfg.Lowers, s.conf.Owners)
		wcfg.Owners = wireOwners(owners)
	}
	var net *readyNet // a network namespace made ahead, when one is ready
	if s.rt.nets != nil && wcfg.Network == NetworkNone && s.conf.Network != NetworkFiltered && s.rt.nets.fits(wcfg.Iface) {
		net = s.rt.nets.take()
	}
	if net != nil {
		defer net.close() // init is in it once started; s.tap holds its tap
		wcfg.NetReady = true
	}
	spawned := wire.Mono()
	parent, child, err := controlPair(net, "ctl-child")
	if err != nil {
		return err
	}
	var cgDir *os.File // the group init is cloned into; nil: moved there after the start
	if s.cg != nil && s.rt.cloneInto {
		cgDir, err = s.cg.OpenForClone()
	}
	if err == nil {
		s.cmd, err = s.initCommand(child, wcfg.HostIdmap, cgDir, net != nil)
	}
	if err == nil && net != nil {
		s.tap, net.tap = net.tap, nil
	}
	// The config waits in the socket for init, which reads it as soon as
	// its runtime is up. Should it not fit in the socket's buffer, the
	// write ends once init reads the rest, or fails once child is closed
	// without an init. Where the host builds the root's first part (see
	// aheadOK), init waits for that after its config, and sent has the
	// outcome of both.
	wcfg.RootAhead = s.aheadOK(wcfg)
	sent, cfgSent := make(chan error, 1), make(chan error, 1)
	go func() { cfgSent <- s.sendConfig(ctx, parent, wcfg, ownersToInit) }()
	if !wcfg.RootAhead {
		sent = cfgSent
	}
	inside := cgDir != nil // init is born in its groups: no Add
	if err == nil {
		spawn := s.cmd.Start
		if net != nil { // init is cloned from a thread in net, without CLONE_NEWNET
			spawn = func() error { return s.rt.nets.spawnIn(net, s.cmd.Start) }
		}
		switch {
		case s.cg != nil && s.rt.forkInside:
			inside, err = s.cg.StartInside(spawn)
		case net != nil:
			err = onOwnThread(spawn)
		default:
			err = spawn()
		}
		s.closeChildEnds()
	}
	if cgDir != nil {
		cgDir.Close()
	}
	child.Close()
	if err != nil {
		if s.cmd != nil && s.cmd.Process != nil {
			// Init started, and its thread failed after (it could not
			// leave the sandbox's network namespace or cgroup): init
			// may live on (a parked thread sends no Pdeathsig), and
			// teardown waits for its exit.
			s.cmd.Process.Kill()
			s.waitDone = make(chan struct{})
			go func() { waitExit(s.cmd.Process); s.cmd.Wait(); close(s.waitDone) }()
		}
		<-cfgSent
		parent.Close()
		return fmt.Errorf("starting sandbox init (%s): %w", s.rt.exe, err)
	}
	t = s.times.since(PhaseSpawn, t)
	s.holdMounts()
	if wcfg.RootAhead {
		go func() { sent <- s.buildAhead(parent, wcfg, cfgSent) }()
	}
	s.waitDone = make(chan struct{})
	go func() { waitExit(s.cmd.Process); s.cmd.Wait(); close(s.waitDone) }()
	if s.umap != nil {
		if err := s.umap.apply(s.cmd.Process.Pid); err != nil {
			err = s.initFailure(parent, err)
			<-sent // the config's writer is done (and CreateDeferred's later)
			return err
		}
	}
	// Init builds the root while the host attaches it to the cgroup, if
	// it was not born there (a move waits for an RCU grace period);
	// OpStart lets it go on. If init fails while building the root it
	// says why and exits; the cgroup attach or the start frame may then
	// fail, and the answer read below has the reason.
	var startErr error
	if s.cg != nil && !inside {
		t = time.Now()
		startErr = s.cg.Add(s.cmd.Process.Pid)
		s.times.since(PhaseAttach, t)
	}
	// The config may still be on its way (CreateDeferred): it is awaited
	// after the attach, which goes on meanwhile.
	if err := <-sent; err != nil {
		var de errDeferred
		if errors.As(err, &de) { // no config comes: init ends at teardown, not asked why
			parent.Close()
			return err
		}
		var ae errAhead
		if !errors.As(err, &ae) {
			err = fmt.Errorf("sending config to sandbox init: %w", err)
		}
		return s.initFailure(parent, err)
	}
	if s.later != nil {
		s.conf.Layers, s.conf.Owners = s.deferred.Layers, s.deferred.Owners
	}
	if startErr == nil {
		startErr = wire.WriteFrame(parent, wire.Request{Op: wire.OpStart})
	}
	if startErr != nil {
		return s.initFailure(parent, startErr)
	}
	s.writeInfo() // while init goes on
	var ready wire.Response
	if err := readWithContext(ctx, parent, &ready); err != nil {
		parent.Close()
		return fmt.Errorf("waiting for sandbox to come up: %w", err)
	}
	if ready.Error != "" {
		parent.Close()
		return fmt.Errorf("sandbox setup: %s", ready.Error)
	}
	if ready.Info != nil {
		s.times.stamps(spawned, ready.Info.Stamps, wire.Mono())
		s.diskFd = ready.Info.DiskFd
	}
	s.conn = newConn(parent, s.deathNote)
	return s.startNetwork(ctx)
}

// checkCgroupLimits refuses limits that need a cgroup where the runtime
// has none: a CPU limit.
func (rt *Runtime) checkCgroupLimits(l Limits) error {
	if !rt.cg.Usable() && l.CPUs > 0 {
		return invalid("a CPU limit needs a cgroup, and %s", rt.cg.Reason)
	}
	return nil
}

// makeCgroup makes the sandbox's cgroup with l's memory, pids and CPU
// limits (s.cg), where the runtime's cgroups are usable: a created
// sandbox's init is started in it, a restored one's processes restored
// into it.
func (s *Sandbox) makeCgroup(l Limits) error {
	if !s.rt.cg.Usable() {
		return nil
	}
	g, err := cgroup.Create(s.rt.cg, s.ID, cgroup.Limits{MemoryBytes: l.MemoryBytes, Pids: l.Pids, CPUs: l.CPUs})
	if err != nil {
		return err
	}
	s.cg = g
	return nil
}

// sendConfig writes init's config to ctl: at once, or, with s.later,
// once later gave the root's parts (then in s.deferred), which complete
// it (ownersToInit: init gives the owners, see start).
func (s *Sandbox) sendConfig(ctx context.Context, ctl *os.File, wcfg wire.Config, ownersToInit bool) error {
	if s.later != nil {
		t := time.Now()
		d, err := s.later(ctx)
		s.times.since(PhaseDeferred, t)
		if err != nil {
			return errDeferred{err}
		}
		full := s.conf
		full.Layers, full.Owners = d.mountPaths(), d.Owners // checked where they are now
		if err := full.validateRoot(); err != nil {
			return errDeferred{err}
		}
		s.deferred = d
		if len(d.Layers) > 0 {
			wcfg.Lowers = d.mountPaths()
		}
		if ownersToInit {
			var owners []Owner
			wcfg.Lowers, owners = s.shifted(ctx, wcfg.Lowers, d.Owners)
			wcfg.Owners = wireOwners(owners)
		}
	}
	return wire.WriteFrame(ctl, wcfg)
}

// aheadOK says whether the host builds the first part of wcfg's root
// (sbinit.BuildAhead) in init's mount namespace while init's runtime
// starts: where init is root in the host's user namespace (a root runtime
// without a user map), its disk, if any, a volume of the pool, and its
// layers known (no CreateDeferred). Anything mounted there then is as
// init would have mounted it: the same caller (the host's root), the same
// namespace, from the same config.
func (s *Sandbox) aheadOK(wcfg wire.Config) bool {
	return !s.rt.rootless && s.umap == nil && s.later == nil && !noAhead &&
		(wcfg.Disk == nil || wcfg.Disk.Device != "")
}

// noAhead turns the root built ahead off (tests compare both ways).
var noAhead = false

// buildAhead builds the first part of wcfg's root in init's mount
// namespace (sbinit.BuildAhead) on the mount thread while init's runtime
// starts and decodes its config, then, once the config is sent (cfgSent),
// tells init with OpRootAhead. Should the host not get to start (init's
// mount namespace not held, the mount thread missing or unable to join
// it: nothing mounted there), init builds the whole root itself
// (OpRootSelf), as without RootAhead. Should the build fail once started,
// init is killed (it waits for the frame) and the create fails with the
// build's error (errAhead).
func (s *Sandbox) buildAhead(ctl *os.File, wcfg wire.Config, cfgSent <-chan error) error {
	t := time.Now()
	started := false // BuildAhead ran in init's mount namespace
	var err error
	if s.mountNS == nil {
		err = errors.New("init's mount namespace not held")
	} else {
		idmap := -1
		if wcfg.HostIdmap {
			ns, _ := s.rt.idmap()
			idmap = int(ns.Fd())
		}
		disk := s.volumeMount()
		if disk >= 0 {
			defer unix.Close(disk)
		}
		mntNS := int(s.mountNS.Fd())
		err = onMountThread(func() error {
			if err := testHookAhead("join"); err != nil {
				return err
			}
			if err := unix.Setns(mntNS, unix.CLONE_NEWNS); err != nil {
				return fmt.Errorf("joining init's mount namespace: %w", err)
			}
			started = true
			if err := testHookAhead("build"); err != nil {
				return err
			}
			return sbinit.BuildAhead(&wcfg, idmap, disk)
		})
	}
	if started {
		s.times.since(PhaseRootAhead, t)
	}
	if cerr := <-cfgSent; cerr != nil {
		return cerr
	}
	switch {
	case err != nil && !started:
		s.log.Warn("the host could not start building the sandbox's root: init builds it", "err", err)
		return wire.WriteFrame(ctl, wire.Request{Op: wire.OpRootSelf})
	case err != nil:
		s.cmd.Process.Kill()
		return errAhead{fmt.Errorf("building the sandbox's root ahead on the host, in init's mount namespace: %w", err)}
	}
	return wire.WriteFrame(ctl, wire.Request{Op: wire.OpRootAhead})
}

// errAhead marks an error of the root built ahead (buildAhead), which
// start passes on as it is.
type errAhead struct{ err error }

func (e errAhead) Error() string { return e.err.Error() }
func (e errAhead) Unwrap() error { return e.err }

// testHookAhead, in tests, fails a step of the root built ahead ("hold":
// holdMounts does not hold init's mount namespace; "join": the mount
// thread cannot join it; "build": the build, once in init's namespace).
var testHookAhead = func(step string) error { return nil }

// volumeMount returns a detached mount of the sandbox's volume of the disk
// pool (a clone of this process's mount of the pool, which init's mount
// namespace does not need to hold), with the mount flags a mount of the
// pool's device by subvolume would have (noatime, as the pool's mount), or
// -1 where there is none or the kernel refuses.
func (s *Sandbox) volumeMount() int {
	if s.volume == nil {
		return -1
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, s.volume.Path(), unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		s.log.Debug("mounting the sandbox's volume from the pool's device", "err", err)
		return -1
	}
	attr := unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOEXEC | unix.MOUNT_ATTR__ATIME, Attr_set: unix.MOUNT_ATTR_NOATIME, Propagation: unix.MS_PRIVATE}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(fd)
		s.log.Debug("mounting the sandbox's volume from the pool's device", "err", err)
		return -1
	}
	return fd
}

// deathNote says why the control connection ended: how init exited and
// the end of what it wrote to stderr. It waits briefly for the exit.
func (s *Sandbox) deathNote() string {
	select {
	case <-s.waitDone:
	case <-time.After(time.Second):
		return "sandbox init still running"
	}
	note := "sandbox init exited: " + s.cmd.ProcessState.String()
	if s.stderr != nil {
		if t := strings.TrimSpace(s.stderr.String()); t != "" {
			note += "; its stderr ends with: " + t
		}
	}
	return note
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex // guards buf
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// initFailure explains a start that failed on the host side: init has most
// likely exited after reporting its own error, which is the one to return.
func (s *Sandbox) initFailure(ctl *os.File, hostErr error) error {
	defer ctl.Close()
	select {
	case <-s.waitDone:
	case <-time.After(time.Second): // init still waits for us: it had no error
		s.cmd.Process.Kill()
		<-s.waitDone
	}
	var r wire.Response
	if wire.ReadFrame(ctl, &r) == nil && r.Error != "" {
		return fmt.Errorf("sandbox setup: %s", r.Error)
	}
	return fmt.Errorf("starting sandbox init: %w", hostErr)
}

func readWithContext(ctx context.Context, f *os.File, v any) error {
	done := make(chan error, 1)
	go func() { done <- wire.ReadFrame(f, v) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		f.Close()
		return ctx.Err()
	}
}

func (s *Sandbox) prepareDirs() error {
	lock, dir, err := newOwnedDir(s.rt.stateDir, s.ID)
	if err != nil {
		return err
	}
	s.dir, s.lock = dir, lock
	var dirs []string
	switch {
	case s.conf.RootDir != "": // copy mode: no overlay
	case s.conf.UpperDir != "":
		s.upper = s.conf.UpperDir
		s.work = s.conf.UpperDir + ".work"
		dirs = append(dirs, s.upper, s.work)
	case s.rt.diskFor(&s.conf) == diskHost:
		s.upper, s.work, s.ownUpper = filepath.Join(s.dir, "upper"), filepath.Join(s.dir, "work"), true
		dirs = append(dirs, s.upper, s.work)
	default: // a bounded disk: see prepareDisk
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	return nil
}

// initCommand is the sandbox's init: msb-sandbox (or msb) in new
// namespaces (ready: but the network's, made ahead, which the spawning
// thread enters: see netPool), given the control socket as fd 3, the idmap
// user namespace as fd 4 when idmap, and pipes for stdio (see setupStdio).
func (s *Sandbox) initCommand(ctl *os.File, idmap bool, cgDir *os.File, ready bool) (*exec.Cmd, error) {
	cmd := exec.Command(s.rt.exe)
	cmd.Args = []string{"msb-sandbox-init"}
	cmd.Env = append([]string{sbinit.EnvStage + "=" + sbinit.StageInit}, sbinit.RuntimeEnv...)
	cmd.ExtraFiles = []*os.File{ctl}
	if idmap {
		ns, _ := s.rt.idmap()
		cmd.ExtraFiles = append(cmd.ExtraFiles, ns)
	}
	// What init and the supervisor say when they fail (a panic, an error)
	// is kept for the error that reports the sandbox gone.
	s.stderr = &tailBuffer{max: 8 << 10}
	cmd.Stderr = s.stderr
	if std := s.conf.Stdio; std != nil {
		in, out, errOut, r, err := setupStdio(std, s.stderr)
		if err != nil {
			return nil, err
		}
		s.stdio = r
		// The child ends, closed here once init has them (nil stays
		// /dev/null: a nil *os.File in the interface would not).
		if in != nil {
			cmd.Stdin = in
		}
		if out != nil {
			cmd.Stdout = out
		}
		cmd.Stderr = errOut
		s.childEnds = []*os.File{in, out, errOut}
	}
	flags := uintptr(unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS)
	if s.conf.Network != NetworkHost && !ready {
		flags |= unix.CLONE_NEWNET
	}
	attr := &syscall.SysProcAttr{Cloneflags: flags, Pdeathsig: syscall.SIGKILL}
	switch {
	case s.umap != nil: // mapped by newuidmap and newgidmap once started
		attr.Cloneflags |= unix.CLONE_NEWUSER
		cmd.Env = append(cmd.Env, sbinit.EnvAwaitMap+"=wait")
		cmd.ExtraFiles = append(cmd.ExtraFiles, s.umap.r) // sbinit.MapFd
	case s.rt.rootless:
		attr.Cloneflags |= unix.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	if cgDir != nil {
		attr.UseCgroupFD, attr.CgroupFD = true, int(cgDir.Fd())
	}
	cmd.SysProcAttr = attr
	return cmd, nil
}

// closeChildEnds closes this process's copies of the pipe ends init holds.
func (s *Sandbox) closeChildEnds() {
	for _, f := range s.childEnds {
		if f != nil {
			f.Close()
		}
	}
	s.childEnds = nil
}

// config turns the sandbox config into what init carries out.
func (s *Sandbox) config(limits Limits, disk *wire.Disk) (wire.Config, error) {
	c := s.conf
	tmp, shm := scratchSizes(limits, s.rt.memoryHoldsFiles())
	cfg := wire.Config{
		ID: s.ID, Root: filepath.Join(s.rt.mnt, "root"), Upper: s.upper, Work: s.work, Disk: disk,
		UserXattr: s.rt.rootless, Rootless: s.rt.rootless,
		Hostname: s.Hostname(), Network: c.Network, TmpBytes: tmp, ShmBytes: shm, LimitInodes: s.rt.memoryHoldsFiles(),
		Workdir: c.Workdir, UID: c.User.UID, GID: c.User.GID, CgroupNS: true, MaxOutput: c.MaxOutput,
		Lowers: c.Layers, RootBind: c.RootDir, NoHugePages: thpAlways(),
	}
	if disk != nil {
		cfg.Upper, cfg.Work = filepath.Join(disk.Mount, "upper"), filepath.Join(disk.Mount, "work")
	}
	if cfg.Network == "" || cfg.Network == NetworkNone { // an interface besides loopback, as a container has
		cfg.Iface = sandboxIface()
	}
	if cfg.Network == "" || cfg.Network == NetworkFiltered { // init sees its own namespace
		cfg.Network = NetworkNone
	}
	if c.Network == NetworkFiltered {
		b, err := s.prepareNetwork()
		if err != nil {
			return cfg, err
		}
		c.Binds = append(slices.Clip(c.Binds), b)
	}
	if cfg.Workdir == "" {
		cfg.Workdir = "/"
	}
	if len(cfg.Lowers) == 0 {
		cfg.Lowers = []string{s.rt.empty}
	}
	if c.HostBase {
		cfg.HostDirs = c.HostDirs
		if len(cfg.HostDirs) == 0 {
			cfg.HostDirs = DefaultHostDirs
		}
		if !s.rt.rootless {
			cfg.Masks = hostMasks
			if !c.HostReadAsRoot {
				ns, _ := s.rt.idmap()
				if ns != nil {
					for _, d := range c.HostDirs { // the defaults were checked once
						if err := checkIdmap(d, ns); err != nil {
							return cfg, invalid("host dir %s: %v (Config.HostReadAsRoot binds it without)", d, err)
						}
					}
					cfg.HostIdmap = true
				}
			}
		}
	}
	cfg.Env = defaultEnv(c.Env, cfg.Hostname)
	for _, b := range c.Binds {
		cfg.Binds = append(cfg.Binds, wire.Bind{Source: b.Source, Target: b.Target, ReadOnly: b.ReadOnly})
	}
	if c.Sudo != "" {
		cfg.Sudo = true
		cfg.Binds = append(cfg.Binds, wire.Bind{Source: s.rt.exe, Target: c.Sudo, ReadOnly: true})
	}
	cfg.Rlimits = s.rt.rlimits(limits)
	if ss := c.Session; ss != nil {
		cfg.Session = &wire.SessionStart{Name: ss.Name, Env: ss.Env, Dir: ss.Dir}
	}
	return cfg, nil
}

// defaultEnv is the sandbox's environment: a clean base the config extends.
func defaultEnv(extra []string, hostname string) []string {
	base := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root", "TERM=xterm", "LANG=C.UTF-8", "HOSTNAME=" + hostname,
	}
	return envlist.Merge(base, extra)
}

func (s *Sandbox) writeInfo() {
	info := stateInfo{InitPid: s.cmd.Process.Pid, Created: time.Now()}
	info.InitStart, _ = procStart(info.InitPid)
	if s.cg != nil {
		info.CgroupDirs = s.cg.Dirs()
	}
	b, _ := json.Marshal(info)
	os.WriteFile(filepath.Join(s.dir, "info.json"), b, 0o600)
}

// Close kills every process in the sandbox and returns once they are all
// gone (the supervisor killed and reaped the rest and answered shutdown,
// or init was reaped; init's own exit may still be running), and all they
// wrote to Config.Stdio is copied, after moving a kept upper
// dir (KeepUpper) to where UpperDir says and removing the work dir of a
// caller's upper dir (Config.UpperDir). The rest (its mounts, its disk
// volume unless RuntimeOptions.DiskAdmitted, its cgroups and state dir)
// the runtime removes in the background: Cleaned says when that is done,
// and Runtime.Close waits for it. A killed msb leaves it to Runtime.GC, as
// it leaves a live sandbox.
func (s *Sandbox) Close() error {
	s.closeOnce.Do(func() {
		start := time.Now()
		if s.conn != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := s.conn.call(ctx, &wire.Request{Op: wire.OpShutdown})
			s.ended = err == nil
			cancel()
			s.times.since(PhaseShutdown, start)
		}
		s.closeErr = s.stop()
		if s.rt.syncDisk {
			s.releaseMounts() // the volume is busy while mounted
			s.closeErr = errors.Join(s.closeErr, s.removeVolume())
		}
		s.times.since(PhaseClose, start)
		s.log.Debug("sandbox closed", "err", s.closeErr)
		s.rt.cleanLater(s)
	})
	return s.closeErr
}

// Alive reports whether the sandbox's init is still running (it ends at
// Close, or when something outside the sandbox kills it).
func (s *Sandbox) Alive() bool {
	select {
	case <-s.waitDone:
		return false
	default:
		return true
	}
}

// Cleaned is closed once the sandbox's cleanup after Close is done (see
// Close); CleanupErr then says what failed.
func (s *Sandbox) Cleaned() <-chan struct{} { return s.cleaned }

// CleanupErr is what the cleanup after Close could not remove; nil until
// Cleaned is closed.
func (s *Sandbox) CleanupErr() error {
	select {
	case <-s.cleaned:
		return s.cleanupErr
	default:
		return nil
	}
}

// Timings are the phases of the sandbox's creation, of its Close once it
// returned, and of its cleanup once Cleaned is closed, in that order.
func (s *Sandbox) Timings() []Phase { return s.times.list() }

// teardown undoes start, whatever stage it reached.
func (s *Sandbox) teardown() error {
	err := s.stop()
	s.cleanup()
	return errors.Join(err, s.cleanupErr)
}

// stop ends the sandbox's processes (init is killed if it does not exit
// by itself), then lets go of its pipes and socket, and of the paths the
// caller sees (a kept upper dir, the work dir of the caller's upper dir).
func (s *Sandbox) stop() error {
	var errs []error
	s.closeChildEnds()
	t := time.Now()
	if s.cmd != nil && s.cmd.Process != nil && s.exitOnPath() {
		s.awaitInit()
		t = s.times.since(PhaseReap, t)
	}
	s.fwd.stop()
	// Every process of the sandbox is gone: its ends of the stdio pipes are
	// closed, and the relays finish what is left.
	s.stdio.close()
	if s.cmd != nil && s.cmd.Process != nil {
		s.stdio.wait()
	}
	if s.conn != nil {
		s.conn.close()
	}
	if s.tap != nil {
		s.tap.Close()
		s.tap = nil
	}
	if s.callerTrees() {
		// The caller uses these trees once Close returns: no mount of
		// them may be left.
		s.releaseMounts()
	}
	if s.dir != "" {
		if s.ownUpper && s.conf.KeepUpper {
			kept := filepath.Join(s.rt.stateDir, "kept-"+s.ID)
			if err := os.Rename(s.upper, kept); err != nil {
				errs = append(errs, fmt.Errorf("keeping upper dir: %w", err))
			}
			s.upper = kept
		}
		if !s.ownUpper && s.work != "" && !s.restored { // the caller's upper dir
			if err := RemoveAll(s.work); err != nil {
				errs = append(errs, err)
			}
		}
	}
	s.times.since(PhaseRelease, t)
	return errors.Join(errs...)
}

// exitOnPath says whether Close waits for init's exit: unless the
// supervisor's answer to shutdown said every other process is gone, or
// where Close needs init's mounts gone (a caller's trees, a disk deleted
// on the path). Otherwise the cleanup awaits it.
func (s *Sandbox) exitOnPath() bool { return !s.ended || s.callerTrees() || s.rt.syncDisk }

// callerTrees: the caller uses trees of the sandbox after Close.
func (s *Sandbox) callerTrees() bool {
	return s.conf.UpperDir != "" || s.conf.RootDir != "" || s.conf.KeepUpper
}

// awaitInit waits until init is reaped, killing it after 2 s.
func (s *Sandbox) awaitInit() {
	select {
	case <-s.waitDone:
	case <-time.After(2 * time.Second):
		s.cmd.Process.Kill()
		<-s.waitDone
	}
}

// holdMounts opens init's mount namespace, so that the kernel tears the
// sandbox's mounts down (some 25: most of what init's exit took, 4-8 ms) when
// releaseMounts closes it, in the cleanup after Close, instead of in
// init's exit, which Close waits for. It is opened before init makes
// itself non-dumpable; without it init's exit does the unmounting.
func (s *Sandbox) holdMounts() {
	err := testHookAhead("hold")
	var ns *os.File
	if err == nil {
		ns, err = os.Open("/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/ns/mnt")
	}
	if err != nil {
		s.log.Debug("not holding the sandbox's mount namespace: its mounts go with init", "err", err)
		return
	}
	s.mountNS = ns
}

// releaseMounts lets go of init's mount namespace: once init is gone, this
// unmounts everything the sandbox mounted.
func (s *Sandbox) releaseMounts() {
	s.confMu.Lock()
	if s.resetDisk != nil {
		s.resetDisk.Close()
		s.resetDisk = nil
	}
	s.confMu.Unlock()
	if err := s.unmountHost(); err != nil {
		s.log.Warn("unmounting a restored sandbox's root", "err", err)
	}
	if s.mountNS == nil {
		return
	}
	t := time.Now()
	s.mountNS.Close()
	s.mountNS = nil
	s.times.since(PhaseMountsRm, t)
}

// testHookCleanup, in tests, stops a cleanup at a step to kill msb there.
var testHookCleanup = func(step string) {}

// removeVolume deletes the sandbox's disk volume, if it has one left.
func (s *Sandbox) removeVolume() error {
	if s.volume == nil {
		return nil
	}
	t := time.Now()
	err := s.volume.Remove()
	s.volume = nil
	s.times.since(PhaseVolume, t)
	return err
}

// cleanup removes what the sandbox's processes left, once they are gone:
// its mounts, disk volume, cgroups and state dir; then it lets go of the
// owner lock and closes Cleaned.
func (s *Sandbox) cleanup() {
	var errs []error
	start := time.Now()
	testHookCleanup("begin")
	if s.cmd != nil && s.cmd.Process != nil && !s.exitOnPath() {
		t := time.Now()
		s.awaitInit()
		s.times.since(PhaseExit, t)
	}
	s.releaseMounts()
	errs = append(errs, s.removeVolume())
	testHookCleanup("volume")
	t := time.Now()
	if s.cg != nil {
		if err := s.cg.Destroy(); err != nil {
			errs = append(errs, err)
		}
		t = s.times.since(PhaseCgroupRm, t)
	}
	if s.dir != "" {
		if err := RemoveAll(s.dir); err != nil {
			errs = append(errs, err)
		}
		s.times.since(PhaseStateRm, t)
	}
	if s.lock != nil {
		s.lock.Close()
	}
	s.times.since(PhaseCleanup, start)
	s.cleanupErr = errors.Join(errs...)
	close(s.cleaned)
}

// UpperDir is the sandbox's writable layer on the host (after Close, where
// it was kept): Config.UpperDir, or the private one of a sandbox without a
// bounded disk (KeepUpper). A bounded disk (see Limits.DiskBytes) has no
// host path, and UpperDir is "".
func (s *Sandbox) UpperDir() string { return s.upper }

// Usage reports the sandbox's cgroup counters; without a cgroup it reports
// ErrNoCgroup.
func (s *Sandbox) Usage() (cgroup.Usage, error) {
	if s.cg == nil {
		return cgroup.Usage{}, ErrNoCgroup
	}
	return s.cg.Usage()
}

// ErrNoCgroup means the sandbox runs without a cgroup (rootless without
// delegation), so no usage figures exist.
var ErrNoCgroup = errors.New("sandbox has no cgroup")

// InitPid is the host pid of the sandbox's init.
func (s *Sandbox) InitPid() int { return s.cmd.Process.Pid }

// RemoveAll removes the tree p even where overlayfs left directories
// without permissions (its work dir) that a rootless caller must open up
// before it can empty them.
func RemoveAll(p string) error {
	err := os.RemoveAll(p)
	if err == nil {
		return nil
	}
	// WalkDir visits a directory before reading it, so the chmod comes
	// first.
	filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(q, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("removing %s: %w", p, err)
	}
	return nil
}

// controlPair is a sandbox's control socket: the host's end and the one
// its init (child) gets. It is net's pair when net (a network namespace
// made ahead, or nil) has one, made in the namespace, so the socket lies
// in the sandbox's network namespace and a dump can take it; else a new
// socketpair. The host's end goes through the netpoller (see conn): a
// response then wakes the goroutine that waits for it on the thread that
// read it. The child's end stays blocking (the flag is per end).
func controlPair(net *readyNet, child string) (host, init *os.File, err error) {
	var fds [2]int
	if net != nil && net.ctl != nil {
		fds[0], fds[1], net.ctl = net.ctl[0], net.ctl[1], nil
	} else if fds, err = unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("making the control socket non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "ctl"), os.NewFile(uintptr(fds[1]), child), nil
}
