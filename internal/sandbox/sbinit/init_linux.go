package sbinit

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"

	"github.com/minisandbox/msb/internal/sandbox/sudo"
	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// Environment variables by which msb tells a re-executed copy of itself
// which role to play. The supervisor's config comes on a descriptor (a
// memfd) whose number EnvConfigFd gives: nothing but that number is in an
// environment a process of the sandbox could read.
const (
	EnvStage    = "MSB_SANDBOX_STAGE"
	EnvConfigFd = "MSB_SANDBOX_CONFIG_FD"
	StageInit   = "init"
	StageSup    = "supervisor"
)

// Steps init and the supervisor stamp on their way to ready (wire.Stamp),
// in order.
const (
	StepInitConfig = "init.config"  // init's Go runtime up, its config read
	StepInitRoot   = "init.root"    // the root built and pivoted into
	StepInitStart  = "init.start"   // the host's start (init is in its cgroups)
	StepInitCaps   = "init.caps"    // cgroup namespace, bounding set, the supervisor's capabilities
	StepSupMain    = "sup.main"     // the exec'd supervisor's Go runtime up (not stamped in place)
	StepSupHarden  = "sup.hardened" // seccomp and the rest of harden done
	StepSupSession = "sup.session"  // Config.Session's shell answering, the spare threads made
)

// RuntimeEnv is the Go runtime's settings for init and the supervisor, in
// their environment from the start. One P: the supervisor mostly waits
// (on its children, their pipes and the control socket), and each P costs
// memory whether it is used or not: with one instead of this machine's two,
// an idle supervisor's anonymous memory went from 1.48 to 1.20 MiB, and a
// default of one P per CPU costs more on larger hosts. No transparent huge
// pages for the heap: where the kernel's THP mode is "always" (Debian's
// default kernel), khugepaged merges a few touched pages of the idle
// supervisor's heap into a 2 MiB page, and the supervisor grew by 2 MiB
// in the seconds after a small command (TestCgroupV2's VM boots that kernel).
var RuntimeEnv = []string{"GOMAXPROCS=1", "GODEBUG=disablethp=1"}

// CtlFd is the control socket's descriptor number in init and supervisor.
const CtlFd = 3

// IsChild reports whether this process was started as a sandbox stage,
// or as sudo: the init binary bound at a sandbox's sudo path (package sudo).
func IsChild() bool { return os.Getenv(EnvStage) != "" || isSudo() }

func isSudo() bool { return len(os.Args) > 0 && filepath.Base(os.Args[0]) == "sudo" }

// Main runs the stage named in the environment (or sudo's client) and
// never returns.
func Main() {
	stage := os.Getenv(EnvStage)
	if stage == "" && isSudo() {
		os.Exit(sudo.Main(os.Args[1:]))
	}
	var err error
	switch stage {
	case StageInit:
		err = initMain()
	case StageSup:
		err = supervisorMain()
	case StageProbe:
		err = probeMain()
	case StageLimits:
		err = limitsMain()
	case StageHold:
		err = holdMain()
	case StageTree:
		err = treeMain()
	case StageShift:
		err = shiftMain()
	case StageResetRoot:
		err = resetRootMain()
	case StageSudoMonitor:
		os.Exit(sudo.Monitor())
	default:
		err = fmt.Errorf("unknown sandbox stage %q", stage)
	}
	exit(stage, err)
}

// exit ends the process: status 0 when err is nil, else 125 after saying
// why on stderr and, in init and the supervisor, to the host.
func exit(stage string, err error) {
	if err != nil {
		if stage == StageInit || stage == StageSup {
			// In JSON, which every host reads: init may fail before it
			// knows the host's encoding (see ctlWriter).
			w := wire.NewWriter(os.NewFile(CtlFd, "ctl"))
			w.SetBinary(false)
			w.Write(wire.Response{Error: err.Error()})
		}
		fmt.Fprintf(os.Stderr, "msb sandbox %s: %v\n", stage, err)
		os.Exit(125)
	}
	os.Exit(0)
}

// initMain is PID 1 before it becomes the supervisor: build the root,
// pivot into it, cut the capability bounding set, then serve as the
// supervisor in the same process, or (in a binary built with cgo) by exec.
func initMain() error {
	runtime.LockOSThread() // the thread every process of the sandbox is forked from (see spawner)
	if err := awaitMap(); err != nil {
		return err
	}
	ctl := ctlReader(CtlFd)
	var cfg wire.Config
	if err := wire.ReadFrame(ctl, &cfg); err != nil {
		return fmt.Errorf("reading config: %w", err)
	}
	cfg.Stamps = wire.Stamped(nil, StepInitConfig)
	// Whatever msb's caller left open without close-on-exec came along;
	// none of it may reach the supervisor, which keeps only the control
	// socket (buildRoot closes the idmap namespace's descriptor).
	var keep []int
	if cfg.HostIdmap {
		keep = append(keep, wire.IdmapFd)
	}
	if err := closeInherited(keep...); err != nil {
		return err
	}
	if cfg.RootAhead { // the host builds the root's first part meanwhile
		var done wire.Request
		if err := wire.ReadFrame(ctl, &done); err != nil {
			return fmt.Errorf("waiting for the root built ahead: %w", err)
		}
		switch done.Op {
		case wire.OpRootAhead:
		case wire.OpRootSelf: // the host could not start: init builds it all
			cfg.RootAhead = false
		default:
			return fmt.Errorf("waiting for the root built ahead: got op %q", done.Op)
		}
	}
	if err := buildRoot(&cfg); err != nil {
		return err
	}
	if err := giveOwners(cfg.Root, cfg.Owners); err != nil {
		return err
	}
	if cfg.Hostname != "" {
		if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
			return fmt.Errorf("setting hostname: %w", err)
		}
	}
	switch {
	case cfg.NetReady: // born in a namespace the host set up ahead (PrepareNetwork), whose tap the host holds
	default:
		if cfg.Network == "none" {
			if err := loopbackUp(); err != nil {
				return err
			}
		}
		if cfg.Iface != nil {
			if err := ifaceUp(cfg.Iface); err != nil {
				return err
			}
		}
	}
	if err := pivot(cfg.Root); err != nil {
		return err
	}
	cfg.Stamps = wire.Stamped(cfg.Stamps, StepInitRoot)
	// Made while the host attaches init to its cgroups, which on cgroup v1
	// often takes longer than building the root: the threads move with
	// the process, and limitCaps below covers them. The signal handling
	// first: its threads are not spares.
	if cfg.Session == nil {
		handleSignals()
		prewarmThreads()
	} else { // the rest made beside the session's shell (comeUp)
		defaultSignals()
	}
	// The host puts init in the sandbox's cgroup while init builds the
	// root; it says so with OpStart, before which nothing else may run.
	var start wire.Request
	if err := wire.ReadFrame(ctl, &start); err != nil {
		return fmt.Errorf("waiting for start: %w", err)
	}
	if start.Op != wire.OpStart {
		return fmt.Errorf("waiting for start: got op %q", start.Op)
	}
	cfg.Stamps = wire.Stamped(cfg.Stamps, StepInitStart)
	if cfg.CgroupNS {
		// This makes the sandbox's cgroup the root of what it sees.
		if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
			return fmt.Errorf("unsharing cgroup namespace: %w", err)
		}
		if err := mountCgroups(cfg.Cgroup); err != nil {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("making init non-dumpable: %w", err)
	}
	if err := dropBoundingCaps(); err != nil {
		return err
	}
	// In place, the supervisor's own threads keep only keptCaps, as an
	// exec'd supervisor would (root's capabilities after exec are the
	// bounding set); this thread, whose bounding set and cgroup namespace
	// every process inherits, becomes the spawner's. Where the runtime
	// cannot act on all its threads (cgo), exec instead.
	inPlace, err := limitCaps()
	if err != nil {
		return err
	}
	cfg.Stamps = wire.Stamped(cfg.Stamps, StepInitCaps)
	if inPlace {
		return supervise(cfg) // one Go runtime start per sandbox instead of two
	}
	cfgFd, err := configFd(&cfg)
	if err != nil {
		return err
	}
	if _, err := unix.FcntlInt(CtlFd, unix.F_SETFD, 0); err != nil {
		return fmt.Errorf("passing the control socket on: %w", err)
	}
	if err := passDiskFd(cfg.Disk); err != nil {
		return err
	}
	// The tap's descriptor goes on with the supervisor too: dropped, the
	// device loses its carrier, its routes turn linkdown, and a CRIU
	// restore of the sandbox's routes fails on them.
	if ifaceFd > 0 {
		if _, err := unix.FcntlInt(uintptr(ifaceFd), unix.F_SETFD, 0); err != nil {
			return fmt.Errorf("passing the interface's descriptor on: %w", err)
		}
	}
	// Become the supervisor by exec, staying PID 1: the kernel shields the
	// init of a PID namespace from signals sent inside it, so `kill -9 -1`
	// cannot take the supervisor down. Every thread of the new image
	// descends from this one and inherits the cut bounding set.
	env := append([]string{EnvStage + "=" + StageSup, EnvConfigFd + "=" + strconv.Itoa(cfgFd)}, RuntimeEnv...)
	err = unix.Exec("/proc/self/exe", []string{"msb-sandbox-init"}, env)
	return fmt.Errorf("exec supervisor: %w", err)
}

// passDiskFd keeps init's descriptor of the disk tmpfs open across the
// supervisor's exec: the host reads the sandbox's writable layer through
// it (snapshots, forks), and only init's mount namespace has the tmpfs.
// The supervisor marks it close-on-exec again (keepDiskFd).
func passDiskFd(d *wire.Disk) error { return diskFdFlags(d, 0, "passing the disk's descriptor on") }

// keepDiskFd marks the disk's descriptor an exec'd supervisor got from
// init close-on-exec, so that no process of the sandbox inherits it.
func keepDiskFd(d *wire.Disk) error {
	return diskFdFlags(d, unix.FD_CLOEXEC, "keeping the disk's descriptor from the sandbox")
}

// diskFdFlags sets the descriptor flags of d's descriptor, if it has one.
func diskFdFlags(d *wire.Disk, flags int, what string) error {
	if d == nil || d.Fd <= 0 {
		return nil
	}
	if _, err := unix.FcntlInt(uintptr(d.Fd), unix.F_SETFD, flags); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// closeInherited closes every descriptor above the control socket that is
// not close-on-exec, but those in keep, which it makes close-on-exec. Those
// are what the host passed (the control socket, keep) and what msb's caller
// left open: the Go runtime opens everything close-on-exec.
func closeInherited(keep ...int) error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("listing inherited descriptors: %w", err)
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= CtlFd {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue // ReadDir's own descriptor, gone by now, or the runtime's
		}
		if slices.Contains(keep, fd) {
			_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		} else {
			err = unix.Close(fd)
		}
		if err != nil {
			return fmt.Errorf("closing inherited descriptor %d: %w", fd, err)
		}
	}
	return nil
}

// ctlReader reads the control socket with plain blocking read(2)s, as
// init does before it serves: on init's locked thread a read through the
// netpoller would wake a second thread for each frame. It is not an
// *os.File, which would close the socket when collected; the supervisor
// makes the one it serves on (openCtl).
type ctlReader int

func (fd ctlReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(fd), p)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// configFd writes cfg to a memfd that the supervisor inherits (the only
// descriptor besides the control socket without close-on-exec).
func configFd(cfg *wire.Config) (int, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return -1, err
	}
	fd, err := unix.MemfdCreate("msb-sandbox-config", 0)
	if err != nil {
		return -1, fmt.Errorf("creating the supervisor's config memfd: %w", err)
	}
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("writing the supervisor's config: %w", err)
		}
		b = b[n:]
	}
	return fd, nil
}

// readConfig reads and closes the config init passed on.
func readConfig() (wire.Config, error) {
	var cfg wire.Config
	fd, err := strconv.Atoi(os.Getenv(EnvConfigFd))
	if err != nil || fd <= CtlFd {
		return cfg, fmt.Errorf("no config descriptor in %s=%q", EnvConfigFd, os.Getenv(EnvConfigFd))
	}
	f := os.NewFile(uintptr(fd), "config")
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<40))
	if err != nil {
		return cfg, fmt.Errorf("reading config: %w", err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return cfg, fmt.Errorf("decoding config: %w", err)
	}
	return cfg, nil
}
