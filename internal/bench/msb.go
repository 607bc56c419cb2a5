package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
)

// msbMethod makes a task the way the engine does: Prepare (the cached
// layers looked up and leased), a sandbox over them, and, with session, a
// persistent shell that takes the commands; otherwise each command runs in
// a fresh bash -c (Exec).
type msbMethod struct {
	rt      *sandbox.Runtime
	wl      *workload
	session bool
	// uppers, when set, is where each task gets its writable layer as a
	// host directory (Config.UpperDir), so that the disk measure can count
	// what it wrote: by default the layer is a volume of the runtime's disk
	// pool (root) or a tmpfs (rootless), which no host path reaches.
	uppers string
}

func (m *msbMethod) name() string { return MethodMSB }

// files are the sandbox binary and the task's layers (their trees are
// hard links to the store's objects).
func (m *msbMethod) files(_ context.Context, i int) ([]string, error) {
	fs := []string{m.rt.Exe()}
	if !m.wl.bare() {
		fs = append(append(fs, m.wl.envTree), m.wl.repoStacks[i%len(m.wl.insts)]...)
	}
	return fs, nil
}

func (m *msbMethod) create(ctx context.Context, i int) (liveTask, error) {
	cfg := sandbox.Config{HostBase: true}
	release := func() error { return nil }
	if m.wl.cache != nil {
		p, err := m.wl.cache.Prepare(ctx, m.wl.instance(i), m.wl.spec, nil)
		if err != nil {
			return nil, err
		}
		cfg, release = p.SandboxConfig(), p.Release
	}
	var upper string
	if m.uppers != "" {
		d, err := os.MkdirTemp(m.uppers, "upper-")
		if err != nil {
			release()
			return nil, err
		}
		upper, cfg.UpperDir = d, d
		inner := release
		release = func() error { return errors.Join(inner(), sandbox.RemoveAll(d)) }
	}
	if m.session { // opened by the create, as a caller that wants one at once does
		cfg.Session = &sandbox.SessionStart{Name: benchSession}
	}
	sb, err := m.rt.Create(ctx, cfg)
	if err != nil {
		release()
		return nil, err
	}
	t := &msbTask{sb: sb, release: release, upper: upper, state: filepath.Join(m.rt.StateDir(), sb.ID)}
	if m.session {
		t.session = benchSession
	}
	return t, nil
}

// benchSession is the name of the session a task keeps.
const benchSession = "bench"

type msbTask struct {
	sb      *sandbox.Sandbox
	session string // "" runs each command with Exec
	release func() error
	state   string // the sandbox's state dir
	upper   string // its host upper dir, when the method gave one
}

func (t *msbTask) run(ctx context.Context, command string) error {
	req := session.ExecRequest{Command: command, Timeout: commandTimeout}
	var res session.Result
	var err error
	if t.session != "" {
		res, err = t.sb.SessionExec(ctx, t.session, req)
	} else {
		res, err = t.sb.Exec(ctx, req)
	}
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return exitError(res.ExitCode, res.Output)
	}
	return nil
}

// close is the whole teardown, as every method's close is: the sandbox
// closed, its layers' lease released, and the cleanup Close leaves to the
// background (mounts, disk volume, cgroups, state dir) done. A caller of
// the engine gets control back before that cleanup, but the machine is not
// free of the task until it is over, so close times and throughput count it.
func (t *msbTask) close() error {
	err := errors.Join(t.sb.Close(), t.release())
	<-t.sb.Cleaned()
	return errors.Join(err, t.sb.CleanupErr())
}

// phaseTimes are the sandbox's phases (sandbox.Timings), its cleanup's
// included (close waited for it).
func (t *msbTask) phaseTimes() []phaseTime {
	var out []phaseTime
	for _, p := range t.sb.Timings() {
		out = append(out, phaseTime{p.Name, p.Duration})
	}
	return out
}

func (t *msbTask) pids() []int { return []int{t.sb.InitPid()} }

// dirs are the sandbox's state dir and its writable layer.
func (t *msbTask) dirs(context.Context) ([]string, error) {
	if t.upper == "" {
		return nil, errors.New("msb's task has no host upper dir to count (msbMethod.uppers unset)")
	}
	return []string{t.state, t.upper}, nil
}
