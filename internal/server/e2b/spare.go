package e2b

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/engine"
)

// A spare is a sandbox of the base template started ahead, so that the
// SDK's usual create (Sandbox.create(): the base template, no envVars, no
// network rules) takes it instead of waiting for a sandbox to start. The
// front keeps at most one, and only while Serve runs: it is made
// spareDelay after a create of that shape (not beside the creator's first
// commands, which it would slow on a small machine), and Serve's end
// closes it. It holds its room in the engine as any sandbox does, is
// made only when there is room at once, and gives its room up to a
// create of another shape that finds none (createSandbox). The engine's
// own warm pool does not serve host-base sandboxes.

// spareDelay is how long after a create its spare is made.
const spareDelay = 100 * time.Millisecond

// spares is the front's spare.
type spares struct {
	mu     sync.Mutex      // guards the fields below
	ctx    context.Context // Serve's; nil when not serving: no spares
	ready  *engine.Sandbox // nil: none ready
	making bool
	wg     sync.WaitGroup // the maker in flight
}

// baseRequest is the engine's create of a base sandbox with envs
// (NAME=value): on the host's system directories, or on the root UseBase
// chose.
func (f *Front) baseRequest(envs []string) engine.SandboxRequest {
	return engine.SandboxRequest{Lifetime: -1, IdleTimeout: -1, Labels: e2bLabels(), Network: engine.NetworkNone,
		HostBase: f.base == "", Image: f.base, Workdir: homeDir, Env: append([]string{"HOME=" + homeDir}, envs...), Sudo: f.sudoPath()}
}

// fitsSpare reports whether sr is the create a spare stands for.
func (f *Front) fitsSpare(sr engine.SandboxRequest) bool {
	b := f.baseRequest(nil)
	return sr.HostBase == b.HostBase && sr.Image == b.Image && sr.InstanceID == "" && len(sr.Layers) == 0 && sr.Workdir == b.Workdir &&
		slices.Equal(sr.Env, b.Env) && sr.Network == b.Network && sr.NetPolicy == nil && sr.Sudo == b.Sudo
}

// startSpares lets the front keep a spare until ctx ends; stop closes it
// and waits for one being made.
func (f *Front) startSpares(ctx context.Context) (stop func()) {
	s := &f.spare
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.ctx = nil
		s.mu.Unlock()
		s.wg.Wait()
		f.dropSpare()
	}
}

// takeSpare is the ready spare, if it is still alive, and has the next
// one made.
func (f *Front) takeSpare() *engine.Sandbox {
	defer f.refillSpare()
	sb := f.spare.take()
	if sb == nil {
		return nil
	}
	if _, err := f.e.Sandbox(sb.ID()); err != nil {
		return nil // closed under the front (the engine's shutdown)
	}
	return sb
}

// dropSpare closes the ready spare and reports whether there was one.
func (f *Front) dropSpare() bool {
	sb := f.spare.take()
	if sb == nil {
		return false
	}
	f.e.CloseSandbox(sb.ID())
	return true
}

// take hands over the ready spare (nil: none), leaving none ready.
func (s *spares) take() *engine.Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.ready
	s.ready = nil
	return sb
}

// refillSpare has a spare made spareDelay from now unless one is ready,
// being made, or the front is not serving.
func (f *Front) refillSpare() {
	s := &f.spare
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx := s.ctx
	if ctx == nil || s.ready != nil || s.making {
		return
	}
	s.making = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var sb *engine.Sandbox
		var err error
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(spareDelay):
			req := f.baseRequest(nil)
			req.AdmissionWait = -1 // a spare never waits in line for room
			sb, err = f.e.CreateSandbox(ctx, req)
		}
		s.mu.Lock()
		s.making = false
		keep := err == nil && s.ctx == ctx && ctx.Err() == nil
		if keep {
			s.ready = sb
		}
		s.mu.Unlock()
		switch {
		case err != nil && !errors.Is(err, context.Canceled):
			f.log.Debug("e2b: no spare of the base template", "err", err)
		case err == nil && !keep:
			f.e.CloseSandbox(sb.ID())
		}
	}()
}

// createSandbox creates sr's sandbox, taking the spare when sr is its
// shape. Otherwise, while a spare is ready, it first tries without
// waiting for room: with none (engine.ErrQuota, counted as a refused
// admission), it closes the spare, whose room the create may need, and
// waits for room as sr asks.
func (f *Front) createSandbox(ctx context.Context, sr engine.SandboxRequest) (*engine.Sandbox, error) {
	if f.fitsSpare(sr) {
		if sb := f.takeSpare(); sb != nil {
			return sb, nil
		}
	} else if f.hasSpare() {
		now := sr
		now.AdmissionWait = -1
		sb, err := f.e.CreateSandbox(ctx, now)
		if !errors.Is(err, engine.ErrQuota) {
			return sb, err
		}
		f.dropSpare()
	}
	return f.e.CreateSandbox(ctx, sr)
}

// hasSpare reports whether a spare is ready.
func (f *Front) hasSpare() bool {
	f.spare.mu.Lock()
	defer f.spare.mu.Unlock()
	return f.spare.ready != nil
}
