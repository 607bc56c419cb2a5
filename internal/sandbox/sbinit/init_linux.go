package sbinit

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"

	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// Environment variables by which msb tells a re-executed copy of itself
// which role to play.
const (
	EnvStage  = "MSB_SANDBOX_STAGE"
	EnvConfig = "MSB_SANDBOX_CONFIG"
	StageInit = "init"
	StageSup  = "supervisor"
)

// CtlFd is the control socket's descriptor number in init and supervisor.
const CtlFd = 3

// IsChild reports whether this process was started as a sandbox stage.
func IsChild() bool { return os.Getenv(EnvStage) != "" }

// Main runs the stage named in the environment and never returns.
func Main() {
	var err error
	switch os.Getenv(EnvStage) {
	case StageInit:
		err = initMain()
	case StageSup:
		err = supervisorMain()
	case StageProbe:
		err = probeMain()
	case StageLimits:
		err = limitsMain()
	default:
		err = fmt.Errorf("unknown sandbox stage %q", os.Getenv(EnvStage))
	}
	if err != nil {
		if stage := os.Getenv(EnvStage); stage == StageInit || stage == StageSup {
			wire.WriteFrame(os.NewFile(CtlFd, "ctl"), wire.Response{Error: err.Error()})
		}
		fmt.Fprintf(os.Stderr, "msb sandbox %s: %v\n", os.Getenv(EnvStage), err)
		os.Exit(125)
	}
	os.Exit(0)
}

// initMain is PID 1 before it becomes the supervisor: build the root,
// pivot into it, cut the capability bounding set.
func initMain() error {
	runtime.LockOSThread() // unshare below applies to this thread, which forks the supervisor
	ctl := os.NewFile(CtlFd, "ctl")
	var cfg wire.Config
	if err := wire.ReadFrame(ctl, &cfg); err != nil {
		return fmt.Errorf("reading config: %w", err)
	}
	if err := buildRoot(&cfg); err != nil {
		return err
	}
	if cfg.Hostname != "" {
		if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
			return fmt.Errorf("setting hostname: %w", err)
		}
	}
	if cfg.Network == "none" {
		if err := loopbackUp(); err != nil {
			return err
		}
	}
	if err := pivot(cfg.Root); err != nil {
		return err
	}
	// The host puts init in the sandbox's cgroup while init builds the
	// root; it says so with OpStart, before which nothing else may run.
	var start wire.Request
	if err := wire.ReadFrame(ctl, &start); err != nil || start.Op != wire.OpStart {
		return fmt.Errorf("waiting for start: %v (op %q)", err, start.Op)
	}
	if cfg.CgroupNS {
		// This makes the sandbox's cgroup the root of what it sees.
		if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
			return fmt.Errorf("unsharing cgroup namespace: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("making init non-dumpable: %w", err)
	}
	if err := dropBoundingCaps(); err != nil {
		return err
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	// Become the supervisor by exec, staying PID 1: the kernel shields the
	// init of a PID namespace from signals sent inside it, so `kill -9 -1`
	// cannot take the supervisor down. Every thread of the new image
	// descends from this one and inherits the cut bounding set.
	env := []string{EnvStage + "=" + StageSup, EnvConfig + "=" + string(b)}
	err = unix.Exec("/proc/self/exe", []string{"msb-sandbox-init"}, env)
	return fmt.Errorf("exec supervisor: %w", err)
}
