package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/store"
	"github.com/minisandbox/msb/internal/task"
)

// SandboxRequest says what sandbox to create: a task sandbox for a known
// instance, or (InstanceID empty) a sandbox from raw cache layers or the
// host's system directories.
type SandboxRequest struct {
	// InstanceID: the agent's sandbox of this instance, at the task's
	// starting state (repository at the base commit, environment; for
	// SWE-smith the bug committed), working directory its repository
	// (/testbed, or where its image keeps it).
	InstanceID string
	// Layers are refs or digests of cache layers, bottom first, each with
	// its parents (raw sandboxes only).
	Layers []string
	// HostBase binds the host's /usr, /bin, /lib* and /etc read-only
	// (raw sandboxes; the default when Layers is empty).
	HostBase bool
	// Image names the raw sandbox's root, below Layers: an imported image
	// (a reference, image/<ref>, sha256:<digest>), a Debian base msb built
	// (debian/<suite>/<key>, debian/<name>) or any other root
	// rootfs.Resolve names besides the host; its config gives defaults
	// (see applyImage).
	Image   string
	Workdir string
	// Env holds NAME=value entries added to the sandbox's environment.
	Env []string
	// Network is "none" (default), "host" or "filtered".
	Network string
	Labels  map[string]string

	// NetPolicy is what a filtered sandbox may reach (nil: all but the
	// host's loopback).
	NetPolicy *sandbox.NetPolicy

	// Sudo, when set, is where the sandbox gets a sudo that its supervisor
	// serves (sandbox.Config.Sudo): raw and image sandboxes only.
	Sudo string
	// Session, when set, names a session the create opens (no env of its
	// own, the sandbox's directory), as OpenSession would after it: its
	// shell starts beside the sandbox's own start (sandbox.Config.Session),
	// or a spare's session started ahead is taken.
	Session string

	// Limits' non-zero fields replace the engine's defaults.
	Limits api.Limits
	// MaxOutput caps each output stream of a command (0: 1 MiB).
	MaxOutput int
	// Lifetime and IdleTimeout bound the sandbox: 0 takes the engine's
	// defaults (Config.Lifetime, IdleTimeout), negative is none. Past
	// either the engine closes it (reaped).
	Lifetime, IdleTimeout time.Duration
	// AdmissionWait is how long to wait for room (memory, disk, the number
	// of sandboxes): 0 as long as ctx allows, negative not at all (fail
	// with ErrQuota).
	AdmissionWait time.Duration
	// Warm, for an instance or an image, sets how many spares of this
	// environment and shape the engine keeps started ahead (bounded by
	// Config.Spares; 0: what was asked before, else
	// Config.SparesPerInstance). See pool.go.
	Warm int
}

// Sandbox is a live sandbox of the engine. Its methods are safe for
// concurrent use; after Close they fail with sandbox.ErrClosed.
type Sandbox struct {
	e *Engine
	// box and tbox are the sandbox and, for a task sandbox, its task
	// sandbox (nil for a raw one): atomic because Rollback replaces them
	// while other calls read them (a call on the replaced one fails as
	// after a close). lease holds a raw sandbox's layers (guarded by mu).
	box     atomic.Pointer[sandbox.Sandbox]
	tbox    atomic.Pointer[task.Sandbox]
	lease   *store.Lease
	release func() // admission
	limits  sandbox.Limits
	info    api.SandboxInfo
	// created is the config a rollback to creation starts anew: a fork's,
	// or a raw sandbox's once rolled back (Rollback replaces sb); nil for
	// a task sandbox of CreateSandbox, whose task a rollback opens anew.
	created *sandbox.Config
	// stateMu serializes the snapshots, rollbacks and network policy
	// updates of the sandbox: a freeze is not counted, so one snapshot's
	// thaw would end another's.
	stateMu sync.Mutex
	// policy is the network policy UpdateNetPolicy put in force last
	// (policySet: one did), which a rollback's replacement starts with
	// instead of the create's. Guarded by stateMu.
	policy    *sandbox.NetPolicy
	policySet bool

	deadline   time.Time     // end of the lifetime (zero: none)
	idle       time.Duration // idle timeout (0: none)
	active     atomic.Int32  // operations in flight
	lastActive atomic.Int64  // unix ns when the last operation ended

	mu       sync.Mutex // guards sessions, standby, closing, lease; Rollback's swap of the parts
	sessions map[string]bool
	closing  bool // closeAs began: Rollback must not install a new sb
	// standby: the sandbox is a spare whose session shell, standbySession,
	// was started ahead and is neither taken nor dropped yet.
	standby   bool
	closeOnce sync.Once
	closeErr  error
}

// CreateSandbox creates a sandbox and registers it. It waits for
// admission (memory) until ctx ends.
func (e *Engine) CreateSandbox(ctx context.Context, req SandboxRequest) (*Sandbox, error) {
	if err := e.open(); err != nil {
		return nil, err
	}
	for k := range req.Labels {
		if k == "" {
			return nil, fmt.Errorf("%w: a label with an empty name", ErrBadRequest)
		}
	}
	if req.InstanceID != "" {
		if _, err := e.task(req.InstanceID); err != nil {
			return nil, err // before admission: an unknown instance never waits
		}
	}
	img, err := e.cache.lookImage(ctx, req.Image)
	if err != nil {
		return nil, err // before admission too
	}
	if l := req.Limits; l.MemoryBytes < 0 || l.Pids < 0 || l.CPUs < 0 || l.TmpBytes < 0 || l.DiskBytes < 0 {
		return nil, fmt.Errorf("%w: negative limit in %+v", ErrBadRequest, l)
	}
	if req.Warm < 0 {
		return nil, fmt.Errorf("%w: warm %d: give 0 or more", ErrBadRequest, req.Warm)
	}
	if req.Session != "" {
		if err := api.CheckSessionName(req.Session); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
	}
	limits := e.cfg.sandboxLimits(req.Limits)
	key, pooled := e.createKey(req, img, limits)
	var s *Sandbox
	if pooled {
		s = e.takeSpare(key)
	}
	if s == nil {
		if s, err = e.startSandbox(ctx, req, img, limits); err != nil {
			return nil, err
		}
	}
	if req.Session != "" && !s.hasSession(req.Session) { // a spare's: its session started ahead, renamed
		if err := s.OpenSession(ctx, api.SessionRequest{Name: req.Session}); err != nil {
			s.Close()
			return nil, err
		}
	}
	now := time.Now()
	s.lastActive.Store(now.UnixNano())
	lifetime, idle := pickDuration(req.Lifetime, e.cfg.Lifetime), pickDuration(req.IdleTimeout, e.cfg.IdleTimeout)
	if lifetime > 0 {
		s.deadline = now.Add(lifetime)
	}
	s.idle = idle
	s.info = api.SandboxInfo{ID: s.sbox().ID, InstanceID: req.InstanceID, Labels: maps.Clone(req.Labels), Limits: apiLimits(limits),
		Mode: e.rt.Mode(), CreatedAt: now.UTC().Format(time.RFC3339Nano), State: api.SandboxRunning,
		LifetimeNs: int64(lifetime), IdleTimeoutNs: int64(idle)}
	if !s.deadline.IsZero() {
		s.info.ExpiresAt = s.deadline.UTC().Format(time.RFC3339Nano)
	}
	kind := "raw"
	if s.tsk() != nil {
		kind = "task"
		if s.tsk().LayersReused() {
			e.stats.cacheHits.Add(1)
		} else {
			e.stats.cacheMisses.Add(1)
		}
	}
	e.stats.add(&e.stats.created, kind)
	e.mu.Lock()
	closed := e.closed
	if !closed {
		e.sandboxes[s.sbox().ID] = s
	}
	e.mu.Unlock()
	if closed {
		s.Close()
		return nil, ErrClosed
	}
	e.log.Debug("sandbox created", "sandbox", s.sbox().ID, "instance", req.InstanceID, "lifetime", lifetime, "idle_timeout", idle, "spare", s.standby)
	if pooled {
		e.keepAfterCreate(key, req.Warm)
	}
	return s, nil
}

// InitBinary is the executable every sandbox's init runs:
// Config.InitBinary, else msb-sandbox beside this executable, else this
// executable (whose larger runtime starts slower: a benchmark says so).
func (e *Engine) InitBinary() string { return e.rt.Exe() }

// startSandbox admits and starts the sandbox of req (img: its image
// resolved, nil if none), spares yielding their room to it.
func (e *Engine) startSandbox(ctx context.Context, req SandboxRequest, img *resolvedRoot, limits sandbox.Limits) (*Sandbox, error) {
	e.yieldFor(limits)
	release, err := e.reserve(ctx, limits, req.AdmissionWait, agentClass)
	if err != nil {
		return nil, err
	}
	s := &Sandbox{e: e, release: release, limits: limits, sessions: map[string]bool{}}
	if err := s.start(ctx, req, img, limits); err != nil {
		release()
		return nil, err
	}
	return s, nil
}

// pickDuration is req, else def; negative means none (0).
func pickDuration(req, def time.Duration) time.Duration {
	if req == 0 {
		req = def
	}
	return max(req, 0)
}

// start starts the sandbox of req; img is req.Image resolved (nil: start
// resolves it).
func (s *Sandbox) start(ctx context.Context, req SandboxRequest, img *resolvedRoot, limits sandbox.Limits) error {
	if req.InstanceID != "" && req.Sudo != "" {
		return fmt.Errorf("%w: sudo is for raw and image sandboxes, not an instance's", ErrBadRequest)
	}
	if req.InstanceID != "" {
		if len(req.Layers) > 0 || req.HostBase || req.Image != "" {
			return fmt.Errorf("%w: a task sandbox takes its layers from its instance; give layers only without an instance", ErrBadRequest)
		}
		if len(req.Env) > 0 || req.Workdir != "" {
			return fmt.Errorf("%w: a task sandbox has its instance's environment and works in its repository", ErrBadRequest)
		}
		t, err := s.e.task(req.InstanceID)
		if err != nil {
			return err
		}
		ts, err := task.Open(ctx, s.e.env, t, task.Options{Limits: limits, MaxOutput: req.MaxOutput, Network: req.Network, NetPolicy: req.NetPolicy,
			Session: req.Session})
		if err != nil {
			return err
		}
		s.setParts(ts.Sandbox, ts, nil)
		s.markSession(req.Session)
		return nil
	}
	conf := sandbox.Config{HostBase: req.HostBase || len(req.Layers) == 0, Workdir: req.Workdir, Env: req.Env,
		Network: req.Network, Limits: limits, MaxOutput: req.MaxOutput}
	conf.NetPolicy, conf.Sudo = req.NetPolicy, req.Sudo
	if req.Image != "" {
		lease, err := s.e.applyImage(ctx, req, img, &conf)
		if err != nil {
			return err
		}
		s.lease = lease
	} else if len(req.Layers) > 0 {
		paths, lease, err := s.e.cache.leaseLayers(ctx, req.Layers)
		if err != nil {
			return err
		}
		conf.Layers, s.lease = paths, lease
	}
	if req.Session != "" {
		conf.Session = &sandbox.SessionStart{Name: req.Session}
	}
	sb, err := s.e.rt.Create(ctx, conf)
	if err != nil {
		if s.lease != nil {
			s.lease.Release()
		}
		if errors.Is(err, sandbox.ErrInvalidConfig) {
			return fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		return err
	}
	s.box.Store(sb)
	s.markSession(req.Session)
	return nil
}

// markSession records name ("": none), a session the sandbox's create
// opened.
func (s *Sandbox) markSession(name string) {
	if name != "" {
		s.mu.Lock()
		s.sessions[name] = true
		s.mu.Unlock()
	}
}

// hasSession reports whether session name was opened.
func (s *Sandbox) hasSession(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[name]
}

func (e *Engine) open() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	return nil
}

// Sandbox returns a live sandbox by id: ErrGone (saying when and why) for
// one closed recently, ErrNotFound otherwise.
func (e *Engine) Sandbox(id string) (*Sandbox, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.sandboxes[id]
	if !ok {
		if info, ok := e.gone.get(id); ok {
			return nil, goneError(info)
		}
		return nil, fmt.Errorf("%w: sandbox %q", ErrNotFound, id)
	}
	return s, nil
}

// SandboxInfo describes a live sandbox, or one closed recently (its state
// says closed or reaped, and why).
func (e *Engine) SandboxInfo(id string) (api.SandboxInfo, error) {
	e.mu.Lock()
	s, ok := e.sandboxes[id]
	info, gone := e.gone.get(id)
	e.mu.Unlock()
	switch {
	case ok:
		return s.Info(), nil
	case gone:
		return info, nil
	}
	return api.SandboxInfo{}, fmt.Errorf("%w: sandbox %q", ErrNotFound, id)
}

// Sandboxes lists the live sandboxes whose labels include every label of
// match (nil: all), oldest first.
func (e *Engine) Sandboxes(match map[string]string) []api.SandboxInfo {
	e.mu.Lock()
	live := make([]*Sandbox, 0, len(e.sandboxes))
	for _, s := range e.sandboxes {
		live = append(live, s)
	}
	e.mu.Unlock()
	out := []api.SandboxInfo{}
	for _, s := range live {
		info := s.Info()
		ok := true
		for k, v := range match {
			if info.Labels[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, info)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt != out[j].CreatedAt {
			return out[i].CreatedAt < out[j].CreatedAt
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// CloseSandbox closes a live sandbox by id and returns what it was.
func (e *Engine) CloseSandbox(id string) (api.SandboxInfo, error) {
	s, err := e.Sandbox(id)
	if err != nil {
		return api.SandboxInfo{}, err
	}
	err = s.Close()
	info, _ := e.SandboxInfo(id)
	return info, err
}

// ID is the sandbox's id.
func (s *Sandbox) ID() string { return s.info.ID }

// RepoDir is where a task sandbox's repository is (/testbed, or where its
// image keeps it); "" for a raw sandbox.
func (s *Sandbox) RepoDir() string {
	if ts := s.tsk(); ts != nil {
		return ts.RepoDir()
	}
	return ""
}

// Info describes the sandbox.
func (s *Sandbox) Info() api.SandboxInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := s.info
	info.Labels = maps.Clone(s.info.Labels)
	info.Sessions = slices.Sorted(maps.Keys(s.sessions))
	last := time.Unix(0, s.lastActive.Load())
	if s.active.Load() > 0 {
		last = time.Now()
	}
	info.LastActiveAt = last.UTC().Format(time.RFC3339Nano)
	return info
}

// Close kills everything in the sandbox, removes it and gives its memory
// back; it is safe to call more than once.
func (s *Sandbox) Close() error { return s.closeAs(api.SandboxClosed, "") }

// closeAs closes the sandbox, remembering it as state for reason.
func (s *Sandbox) closeAs(state, reason string) error {
	s.closeOnce.Do(func() {
		s.mu.Lock() // Rollback replaces them
		sb, ts, lease := s.parts()
		s.closing = true
		s.mu.Unlock()
		s.closeErr = closeParts(sb, ts, lease)
		s.release()
		info := s.Info()
		info.State, info.Reason, info.Sessions = state, reason, nil
		info.ClosedAt = time.Now().UTC().Format(time.RFC3339Nano)
		s.e.mu.Lock()
		delete(s.e.sandboxes, s.info.ID)
		s.e.gone.add(info)
		s.e.mu.Unlock()
		s.e.log.Debug("sandbox closed", "sandbox", s.info.ID, "state", state, "reason", reason, "err", s.closeErr)
	})
	return s.closeErr
}

// OpenSession starts a persistent shell.
func (s *Sandbox) OpenSession(ctx context.Context, req api.SessionRequest) error {
	defer s.use()()
	if err := api.CheckSessionName(req.Name); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if err := checkEnv(req.Env); err != nil {
		return err
	}
	if req.Dir != "" && !path.IsAbs(req.Dir) {
		return fmt.Errorf("%w: session directory %q is not an absolute path", ErrBadRequest, req.Dir)
	}
	if req.Dir != "" {
		if fe, err := s.Stat(ctx, req.Dir); err != nil || fe.Type != "dir" {
			return fmt.Errorf("%w: session directory %q is not a directory in the sandbox", ErrBadRequest, req.Dir)
		}
	}
	if !s.openStandby(ctx, req) {
		if err := s.sbox().OpenSession(ctx, req.Name, sandbox.SessionOptions{Env: req.Env, Dir: req.Dir}); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.sessions[req.Name] = true
	s.mu.Unlock()
	return nil
}

// openStandby opens session req as the spare's session started ahead,
// by renaming it, where req asks for what that one is (no env, the
// default directory) under a name not yet in use; it reports whether it
// did. A session asked for otherwise ends the standby first.
func (s *Sandbox) openStandby(ctx context.Context, req api.SessionRequest) bool {
	if len(req.Env) > 0 || req.Dir != "" {
		s.dropStandby(ctx)
		return false
	}
	s.mu.Lock()
	taken := s.sessions[req.Name]
	s.mu.Unlock()
	if taken || !s.takeStandby() {
		return false
	}
	if err := s.sbox().RenameSession(ctx, standbySession, req.Name); err != nil {
		s.e.log.Debug("spare's session not taken", "sandbox", s.info.ID, "err", err)
		s.sbox().CloseSession(context.WithoutCancel(ctx), standbySession)
		return false
	}
	s.e.stats.standbyTaken.Add(1)
	return true
}

// dropStandby ends the spare's session started ahead, before the first
// command the client runs outside a session: that command sees only
// what the client started.
func (s *Sandbox) dropStandby(ctx context.Context) {
	if s.takeStandby() {
		s.sbox().CloseSession(context.WithoutCancel(ctx), standbySession)
	}
}

// takeStandby reports whether the spare's session started ahead was
// still there to take, and marks it gone.
func (s *Sandbox) takeStandby() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	had := s.standby
	s.standby = false
	return had
}

// CloseSession ends a session and everything it started.
func (s *Sandbox) CloseSession(ctx context.Context, name string) error {
	defer s.use()()
	err := s.sbox().CloseSession(ctx, name)
	s.mu.Lock()
	delete(s.sessions, name)
	s.mu.Unlock()
	return err
}

// InterruptSession interrupts, as Ctrl-C would, the command running in a
// session (its Exec returns with TimedOut and the output so far) and the
// ones waiting for it (their Exec fails); it reports whether there were
// any, once the interrupted command has ended. The session stays usable.
func (s *Sandbox) InterruptSession(ctx context.Context, name string) (bool, error) {
	defer s.use()()
	n, err := s.sbox().InterruptSession(ctx, name)
	return n > 0, err
}

// ReadFile reads a file inside the sandbox (limit 0: 64 MiB).
func (s *Sandbox) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	defer s.use()()
	return s.sbox().ReadFile(ctx, path, limit)
}

// WriteFile writes a file inside the sandbox, creating parent directories.
func (s *Sandbox) WriteFile(ctx context.Context, path string, data []byte, mode uint32) error {
	defer s.use()()
	return s.sbox().WriteFile(ctx, path, data, mode)
}

// WriteFileAs is WriteFile, the file owned by uid and gid (as the
// sandbox sees them).
func (s *Sandbox) WriteFileAs(ctx context.Context, path string, data []byte, mode uint32, uid, gid int) error {
	defer s.use()()
	return s.sbox().WriteFileAs(ctx, path, data, mode, uid, gid)
}

// ListDir lists a directory inside the sandbox.
func (s *Sandbox) ListDir(ctx context.Context, path string) ([]api.FileEntry, error) {
	defer s.use()()
	ents, err := s.sbox().ListDir(ctx, path)
	if err != nil {
		return nil, err
	}
	out := make([]api.FileEntry, len(ents))
	for i, e := range ents {
		out[i] = api.FileEntry{Name: e.Name, Type: e.Type, Size: e.Size, Mode: e.Mode, Target: e.Target, ModTime: e.ModTime,
			UID: e.UID, GID: e.GID}
	}
	return out, nil
}

// Stat describes one path inside the sandbox (a symlink itself, not its
// target); sandbox.ErrNotFound when there is none.
func (s *Sandbox) Stat(ctx context.Context, p string) (api.FileEntry, error) {
	if !path.IsAbs(p) {
		return api.FileEntry{}, fmt.Errorf("%w: path %q is not absolute", ErrBadRequest, p)
	}
	p = path.Clean(p)
	if p == "/" {
		return api.FileEntry{Name: "/", Type: "dir", Mode: 0o755}, nil
	}
	dir, base := path.Split(p)
	ents, err := s.ListDir(ctx, dir)
	if err != nil {
		return api.FileEntry{}, err
	}
	for _, e := range ents {
		if e.Name == base {
			return e, nil
		}
	}
	return api.FileEntry{}, fmt.Errorf("%w: %s", sandbox.ErrNotFound, p)
}

// PutTar unpacks a tar stream into a directory inside the sandbox.
func (s *Sandbox) PutTar(ctx context.Context, dir string, tarball []byte) error {
	defer s.use()()
	return s.sbox().PutTar(ctx, dir, tarball)
}

// GetTar packs a file or directory inside the sandbox as a tar stream
// (not the whole root, which holds /proc and /dev).
func (s *Sandbox) GetTar(ctx context.Context, p string) ([]byte, error) {
	defer s.use()()
	if path.Clean(p) == "/" {
		return nil, fmt.Errorf("%w: pack a directory, not the sandbox's whole root (it holds /proc and /dev)", ErrBadRequest)
	}
	path := p
	return s.sbox().GetTar(ctx, path)
}

// Diff is the agent's patch: every change in /testbed against the task's
// starting state, as the harness reads it (ErrNoInstance for a raw sandbox).
func (s *Sandbox) Diff(ctx context.Context) (string, error) {
	defer s.use()()
	if s.tsk() == nil {
		return "", ErrNoInstance
	}
	return s.tsk().Diff(ctx)
}

// Evaluate grades the agent's patch (Diff) in a fresh sandbox of the same
// instance, never in this one: what the agent did to its environment
// (variables, conftest.py outside the patch's reach, the venv) cannot
// change the verdict. model names the agent ("" is "none").
func (s *Sandbox) Evaluate(ctx context.Context, model string) (api.EvalResult, api.EvalArtifacts, error) {
	patch, err := s.Diff(ctx)
	if err != nil {
		return api.EvalResult{}, api.EvalArtifacts{}, err
	}
	return s.EvaluatePatch(ctx, model, patch)
}

// EvaluatePatch grades patch in a fresh sandbox of the sandbox's instance.
// It fails at once (ErrTooLarge) where the budgets cannot hold that
// sandbox beside this one, rather than wait for this one's close.
func (s *Sandbox) EvaluatePatch(ctx context.Context, model, patch string) (api.EvalResult, api.EvalArtifacts, error) {
	return s.EvaluateRepeat(ctx, model, &patch, 1)
}

// EvaluateRepeat is EvaluatePatch of patch (nil: the sandbox's own diff)
// with its tests run repeat times, each in a fresh sandbox; a result whose
// runs disagree is marked flaky (task.EvalOptions.Repeat).
func (s *Sandbox) EvaluateRepeat(ctx context.Context, model string, patch *string, repeat int) (api.EvalResult, api.EvalArtifacts, error) {
	if patch == nil {
		p, err := s.Diff(ctx)
		if err != nil {
			return api.EvalResult{}, api.EvalArtifacts{}, err
		}
		patch = &p
	}
	defer s.use()()
	if s.tsk() == nil {
		return api.EvalResult{}, api.EvalArtifacts{}, ErrNoInstance
	}
	// The grading sandbox has this one's limits: a task that needs more
	// memory or disk than the defaults to run its tests is graded with it.
	g := s.limits
	c := &s.e.cfg
	if err := s.e.admit.beside(share{mem: c.memReserve(s.limits), disk: s.limits.DiskBytes}, c.memReserve(g), g.DiskBytes); err != nil {
		return api.EvalResult{}, api.EvalArtifacts{}, err
	}
	return s.e.evaluateIn(ctx, job{pred: api.Prediction{InstanceID: s.info.InstanceID, Model: model, ModelPatch: patch}, limits: &g, repeat: repeat})
}

// Usage reports the sandbox's resource use (sandbox.ErrNoCgroup without a cgroup).
func (s *Sandbox) Usage() (api.SandboxUsage, error) {
	u, err := s.sbox().Usage()
	if err != nil {
		return api.SandboxUsage{}, err
	}
	return api.SandboxUsage{MemoryBytes: u.MemoryBytes, MemoryPeakBytes: u.MemoryPeakBytes, Pids: u.Pids, CPUNanos: u.CPUNanos,
		OOMKills: u.OOMKills, PidsLimitHits: u.PidsLimitHits}, nil
}

// sbox is the sandbox's current isolation sandbox.
func (s *Sandbox) sbox() *sandbox.Sandbox { return s.box.Load() }

// tsk is the sandbox's current task sandbox, nil for a raw sandbox.
func (s *Sandbox) tsk() *task.Sandbox { return s.tbox.Load() }

// parts is what closing the sandbox closes.
func (s *Sandbox) parts() (*sandbox.Sandbox, *task.Sandbox, *store.Lease) {
	return s.sbox(), s.tsk(), s.lease
}

// setParts installs what the sandbox runs on (at creation, or under mu
// when a rollback replaces it).
func (s *Sandbox) setParts(sb *sandbox.Sandbox, ts *task.Sandbox, lease *store.Lease) {
	s.box.Store(sb)
	s.tbox.Store(ts)
	s.lease = lease
}
