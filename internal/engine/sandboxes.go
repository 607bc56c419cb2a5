package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
	"github.com/minisandbox/msb/internal/store"
	"github.com/minisandbox/msb/internal/task"
)

// SandboxRequest says what sandbox to create: a task sandbox for a known
// instance, or (InstanceID empty) a sandbox from raw cache layers or the
// host's system directories.
type SandboxRequest struct {
	// InstanceID: the agent's sandbox of this instance, at the task's
	// starting state (repository at the base commit, environment; for
	// SWE-smith the bug committed), working directory /testbed.
	InstanceID string
	// Layers are refs or digests of cache layers, bottom first, each with
	// its parents (raw sandboxes only).
	Layers []string
	// HostBase binds the host's /usr, /bin, /lib* and /etc read-only
	// (raw sandboxes; the default when Layers is empty).
	HostBase bool
	Workdir  string
	// Env holds NAME=value entries added to the sandbox's environment.
	Env []string
	// Network is "none" (default) or "host".
	Network string
	Labels  map[string]string
	// Limits' non-zero fields replace the engine's defaults.
	Limits api.Limits
	// MaxOutput caps each output stream of a command (0: 1 MiB).
	MaxOutput int
}

// Sandbox is a live sandbox of the engine. Its methods are safe for
// concurrent use; after Close they fail with sandbox.ErrClosed.
type Sandbox struct {
	e       *Engine
	sb      *sandbox.Sandbox
	task    *task.Sandbox // nil for a raw sandbox
	lease   *store.Lease  // raw sandboxes' layers
	release func()        // admission
	info    api.SandboxInfo

	mu        sync.Mutex // guards sessions
	sessions  map[string]bool
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
	limits := e.cfg.sandboxLimits(req.Limits)
	release, err := e.reserve(ctx, memOf(limits))
	if err != nil {
		return nil, err
	}
	s := &Sandbox{e: e, release: release, sessions: map[string]bool{}}
	if err := s.start(ctx, req, limits); err != nil {
		release()
		return nil, err
	}
	s.info = api.SandboxInfo{ID: s.sb.ID, InstanceID: req.InstanceID, Labels: maps.Clone(req.Labels), Limits: apiLimits(limits),
		Mode: e.rt.Mode(), CreatedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	e.mu.Lock()
	closed := e.closed
	if !closed {
		e.sandboxes[s.sb.ID] = s
	}
	e.mu.Unlock()
	if closed {
		s.Close()
		return nil, ErrClosed
	}
	e.log.Debug("sandbox created", "sandbox", s.sb.ID, "instance", req.InstanceID)
	return s, nil
}

func (s *Sandbox) start(ctx context.Context, req SandboxRequest, limits sandbox.Limits) error {
	if req.InstanceID != "" {
		if len(req.Layers) > 0 || req.HostBase {
			return fmt.Errorf("%w: a task sandbox takes its layers from its instance; give layers only without an instance", ErrBadRequest)
		}
		if len(req.Env) > 0 || req.Workdir != "" {
			return fmt.Errorf("%w: a task sandbox has its instance's environment and works in /testbed", ErrBadRequest)
		}
		t, err := s.e.task(req.InstanceID)
		if err != nil {
			return err
		}
		ts, err := task.Open(ctx, s.e.env, t, task.Options{Limits: limits, MaxOutput: req.MaxOutput, Network: req.Network})
		if err != nil {
			return err
		}
		s.task, s.sb = ts, ts.Sandbox
		return nil
	}
	conf := sandbox.Config{HostBase: req.HostBase || len(req.Layers) == 0, Workdir: req.Workdir, Env: req.Env,
		Network: req.Network, Limits: limits, MaxOutput: req.MaxOutput}
	if len(req.Layers) > 0 {
		paths, lease, err := s.e.cache.leaseLayers(ctx, req.Layers)
		if err != nil {
			return err
		}
		conf.Layers, s.lease = paths, lease
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
	s.sb = sb
	return nil
}

func (e *Engine) open() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	return nil
}

// Sandbox returns a live sandbox by id.
func (e *Engine) Sandbox(id string) (*Sandbox, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.sandboxes[id]
	if !ok {
		return nil, fmt.Errorf("%w: sandbox %q", ErrNotFound, id)
	}
	return s, nil
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

// CloseSandbox closes a live sandbox by id.
func (e *Engine) CloseSandbox(id string) error {
	s, err := e.Sandbox(id)
	if err != nil {
		return err
	}
	return s.Close()
}

// ID is the sandbox's id.
func (s *Sandbox) ID() string { return s.info.ID }

// Info describes the sandbox.
func (s *Sandbox) Info() api.SandboxInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := s.info
	info.Labels = maps.Clone(s.info.Labels)
	info.Sessions = slices.Sorted(maps.Keys(s.sessions))
	return info
}

// Close kills everything in the sandbox, removes it and gives its memory
// back; it is safe to call more than once.
func (s *Sandbox) Close() error {
	s.closeOnce.Do(func() {
		if s.task != nil {
			s.closeErr = s.task.Close()
		} else {
			s.closeErr = s.sb.Close()
			if s.lease != nil {
				s.closeErr = errors.Join(s.closeErr, s.lease.Release())
			}
		}
		s.release()
		s.e.mu.Lock()
		delete(s.e.sandboxes, s.info.ID)
		s.e.mu.Unlock()
		s.e.log.Debug("sandbox closed", "sandbox", s.info.ID, "err", s.closeErr)
	})
	return s.closeErr
}

// Exec runs a command: in the named session, or in a fresh bash.
func (s *Sandbox) Exec(ctx context.Context, req api.ExecRequest) (api.ExecResult, error) {
	r := session.ExecRequest{Command: req.Command, Timeout: time.Duration(req.TimeoutNs), SeparateStderr: req.SeparateStderr, MaxOutput: req.MaxOutput}
	var res session.Result
	var err error
	if req.Session == "" {
		res, err = s.sb.Exec(ctx, r)
	} else {
		res, err = s.sb.SessionExec(ctx, req.Session, r)
		if res.SessionEnded {
			s.mu.Lock()
			delete(s.sessions, req.Session)
			s.mu.Unlock()
		}
	}
	if err != nil {
		return api.ExecResult{}, err
	}
	return api.ExecResult{Output: res.Output, Stderr: res.Stderr, ExitCode: res.ExitCode, DurationNs: int64(res.Duration),
		Truncated: res.Truncated, TimedOut: res.TimedOut, SessionEnded: res.SessionEnded}, nil
}

// OpenSession starts a persistent shell.
func (s *Sandbox) OpenSession(ctx context.Context, req api.SessionRequest) error {
	if req.Name == "" {
		return fmt.Errorf("%w: a session needs a name", ErrBadRequest)
	}
	if err := s.sb.OpenSession(ctx, req.Name, sandbox.SessionOptions{Env: req.Env, Dir: req.Dir}); err != nil {
		return err
	}
	s.mu.Lock()
	s.sessions[req.Name] = true
	s.mu.Unlock()
	return nil
}

// CloseSession ends a session and everything it started.
func (s *Sandbox) CloseSession(ctx context.Context, name string) error {
	err := s.sb.CloseSession(ctx, name)
	s.mu.Lock()
	delete(s.sessions, name)
	s.mu.Unlock()
	return err
}

// ReadFile reads a file inside the sandbox (limit 0: 64 MiB).
func (s *Sandbox) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	return s.sb.ReadFile(ctx, path, limit)
}

// WriteFile writes a file inside the sandbox, creating parent directories.
func (s *Sandbox) WriteFile(ctx context.Context, path string, data []byte, mode uint32) error {
	return s.sb.WriteFile(ctx, path, data, mode)
}

// ListDir lists a directory inside the sandbox.
func (s *Sandbox) ListDir(ctx context.Context, path string) ([]api.FileEntry, error) {
	ents, err := s.sb.ListDir(ctx, path)
	if err != nil {
		return nil, err
	}
	out := make([]api.FileEntry, len(ents))
	for i, e := range ents {
		out[i] = api.FileEntry{Name: e.Name, Type: e.Type, Size: e.Size, Mode: e.Mode, Target: e.Target, ModTime: e.ModTime}
	}
	return out, nil
}

// PutTar unpacks a tar stream into a directory inside the sandbox.
func (s *Sandbox) PutTar(ctx context.Context, dir string, tarball []byte) error {
	return s.sb.PutTar(ctx, dir, tarball)
}

// GetTar packs a file or directory inside the sandbox as a tar stream.
func (s *Sandbox) GetTar(ctx context.Context, path string) ([]byte, error) {
	return s.sb.GetTar(ctx, path)
}

// Diff is the agent's patch: every change in /testbed against the task's
// starting state, as the harness reads it (ErrNoInstance for a raw sandbox).
func (s *Sandbox) Diff(ctx context.Context) (string, error) {
	if s.task == nil {
		return "", ErrNoInstance
	}
	return s.task.Diff(ctx)
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
	return s.e.Evaluate(ctx, s.info.InstanceID, model, &patch)
}

// Usage reports the sandbox's resource use (sandbox.ErrNoCgroup without a cgroup).
func (s *Sandbox) Usage() (api.SandboxUsage, error) {
	u, err := s.sb.Usage()
	if err != nil {
		return api.SandboxUsage{}, err
	}
	return api.SandboxUsage{MemoryBytes: u.MemoryBytes, MemoryPeakBytes: u.MemoryPeakBytes, Pids: u.Pids, CPUNanos: u.CPUNanos,
		OOMKills: u.OOMKills, PidsLimitHits: u.PidsLimitHits}, nil
}
