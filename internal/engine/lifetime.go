package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/warm"
)

// Activity: every operation on a Sandbox runs between use() and the func it
// returns. A sandbox with an operation in flight is never idle; once the
// last one ends, its idle time starts.

// use marks an operation in flight; the returned func ends it.
func (s *Sandbox) use() func() {
	s.active.Add(1)
	return func() {
		s.lastActive.Store(time.Now().UnixNano())
		s.active.Add(-1)
	}
}

// expired says whether the sandbox is past its lifetime or idle timeout at
// now, and which.
func (s *Sandbox) expired(now time.Time) (string, bool) {
	if !s.deadline.IsZero() && !now.Before(s.deadline) {
		return api.ReapLifetime, true
	}
	if s.idle > 0 && s.active.Load() == 0 && now.Sub(time.Unix(0, s.lastActive.Load())) >= s.idle {
		return api.ReapIdle, true
	}
	return "", false
}

// reap closes the sandboxes past their lifetime or idle timeout, until
// the engine closes.
func (e *Engine) reap() {
	defer close(e.done)
	t := time.NewTicker(e.cfg.reapInterval())
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case now := <-t.C:
			e.spares.Expire(now)
			e.mu.Lock()
			var due []*Sandbox
			var why []string
			for _, s := range e.sandboxes {
				if r, ok := s.expired(now); ok {
					due, why = append(due, s), append(why, r)
				}
			}
			e.mu.Unlock()
			for i, s := range due {
				e.log.Info("sandbox reaped", "sandbox", s.ID(), "reason", why[i], "instance", s.info.InstanceID)
				e.stats.reaped(why[i])
				s.closeAs(api.SandboxReaped, why[i])
			}
		}
	}
}

// tombstones remember what became of closed sandboxes: the last n, for an
// hour each. The engine's mu guards them.
type tombstones struct {
	n     int
	order []string
	info  map[string]api.SandboxInfo
}

const tombstoneAge = time.Hour

func newTombstones(n int) tombstones {
	return tombstones{n: n, info: map[string]api.SandboxInfo{}}
}

func (t *tombstones) add(info api.SandboxInfo) {
	t.info[info.ID] = info
	t.order = append(t.order, info.ID)
	cutoff := time.Now().Add(-tombstoneAge).UTC().Format(time.RFC3339Nano)
	for len(t.order) > 0 && (len(t.order) > t.n || t.info[t.order[0]].ClosedAt < cutoff) {
		delete(t.info, t.order[0])
		t.order = t.order[1:]
	}
}

func (t *tombstones) get(id string) (api.SandboxInfo, bool) {
	info, ok := t.info[id]
	return info, ok
}

// goneError says what became of a closed sandbox.
func goneError(info api.SandboxInfo) error {
	how := "closed"
	switch info.Reason {
	case api.ReapLifetime:
		how = fmt.Sprintf("reaped: its lifetime of %s ended", time.Duration(info.LifetimeNs))
	case api.ReapIdle:
		how = fmt.Sprintf("reaped: it was idle for its idle timeout of %s", time.Duration(info.IdleTimeoutNs))
	}
	return fmt.Errorf("%w: sandbox %s was %s at %s", ErrGone, info.ID, how, info.ClosedAt)
}

// counters are what the engine did, for metrics.
type counters struct {
	mu          sync.Mutex // guards the maps
	created     map[string]int64
	reapedBy    map[string]int64
	evaluations map[api.Outcome]int64
	cacheHits   atomic.Int64
	cacheMisses atomic.Int64
	// standbyTaken counts sessions opened on a spare's session started ahead.
	standbyTaken atomic.Int64
}

func (c *counters) add(m *map[string]int64, k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *m == nil {
		*m = map[string]int64{}
	}
	(*m)[k]++
}

func (c *counters) reaped(reason string) { c.add(&c.reapedBy, reason) }

func (c *counters) evaluated(o api.Outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.evaluations == nil {
		c.evaluations = map[api.Outcome]int64{}
	}
	c.evaluations[o]++
}

// Stats are counts of what the engine did since it opened.
type Stats struct {
	Live int
	// Created counts sandboxes by kind: "task" (an instance's), "raw".
	Created map[string]int64
	// Reaped counts reaped sandboxes by reason (api.ReapLifetime, ReapIdle).
	Reaped map[string]int64
	// Evaluations counts evaluations (fresh sandboxes) by outcome.
	Evaluations map[api.Outcome]int64
	// CacheHits and CacheMisses count task sandboxes whose layers were
	// there already, and those for which something was built.
	CacheHits, CacheMisses int64
	// EnvBuilds, RepoBuilds, FailedBuilds are the cache's builds.
	EnvBuilds, RepoBuilds, FailedBuilds int64
	// Rejected counts admissions refused or timed out, by resource
	// (sandboxes, memory, disk, queue).
	Rejected map[string]int64
	// Spares are the task sandboxes started ahead and what became of them;
	// SpareSessions counts the clients' first sessions that were a spare's
	// shell started ahead (renamed, not started).
	Spares        warm.Stats
	SpareSessions int64
}

// Stats reports what the engine did since it opened.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	live := len(e.sandboxes)
	e.mu.Unlock()
	c := &e.stats
	c.mu.Lock()
	st := Stats{Live: live, Created: clone(c.created), Reaped: clone(c.reapedBy), Evaluations: map[api.Outcome]int64{}}
	for k, v := range c.evaluations {
		st.Evaluations[k] = v
	}
	c.mu.Unlock()
	st.CacheHits, st.CacheMisses = c.cacheHits.Load(), c.cacheMisses.Load()
	cs := e.cache.c.Stats()
	st.EnvBuilds, st.RepoBuilds, st.FailedBuilds = cs.EnvBuilds, cs.RepoBuilds, cs.FailedBuilds
	st.Rejected = e.admit.rejections()
	st.Spares, st.SpareSessions = e.spares.Stats(), c.standbyTaken.Load()
	return st
}

func clone(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
