package engine

import (
	"context"
	"sync"
	"time"
)

// snapPool keeps children of named snapshots started ahead (spares), so
// that a fork of a snapshot alone (Fork with no sandbox) takes one ready
// instead of starting it. Nouns:
//   - a snapshot's want is how many spares to keep for it: none until a
//     fork asks (ForkRequest.Warm), then the last number asked;
//   - Config.Spares bounds the spares of all snapshots, made or being
//     made (0: the pool keeps none);
//   - a refill starts the spares a snapshot lacks, one after another, in
//     the background after each fork of it. Each spare is admitted as a
//     child is and holds its room while it waits, so spares stay within
//     the daemon's quotas: a refill that finds no room stops (Failed)
//     until the next fork.
//
// A spare is not live for the API (not listed, not reaped) until taken;
// taking it gives it the fork's labels and starts its lifetimes.
type snapPool struct {
	e      *Engine
	ctx    context.Context // ends at close
	cancel context.CancelFunc
	wg     sync.WaitGroup // refills in flight

	mu     sync.Mutex // guards the fields below
	closed bool
	want   map[string]int
	ready  map[string][]*Sandbox
	making map[string]int
	st     PoolStats
}

// PoolStats count what the snapshot pool did since the engine opened.
type PoolStats struct {
	Ready, Making int   // spares now
	Hits, Misses  int64 // children of a snapshot fork that took a spare, or found none
	Made, Failed  int64 // spares started, starts that failed
	// Refills and RefillTime: refills ended and the time they took, from
	// the fork that asked to the last spare ready.
	Refills    int64
	RefillTime time.Duration
}

func newSnapPool(e *Engine) *snapPool {
	ctx, cancel := context.WithCancel(context.Background())
	return &snapPool{e: e, ctx: ctx, cancel: cancel, want: map[string]int{}, ready: map[string][]*Sandbox{}, making: map[string]int{}}
}

// PoolStats reports the snapshot pool.
func (e *Engine) PoolStats() PoolStats {
	p := e.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.st
	for _, r := range p.ready {
		st.Ready += len(r)
	}
	for _, m := range p.making {
		st.Making += m
	}
	return st
}

// takeOrFork is a child of snapshot name: a spare when fromSnapshot (a
// fork of the snapshot alone) and one is ready, else one started now.
func (e *Engine) takeOrFork(ctx context.Context, fromSnapshot bool, name string, src forkSource, snap snapshot) (*Sandbox, error) {
	if fromSnapshot {
		if c := e.pool.take(name); c != nil {
			if err := e.register(c, src.info); err != nil {
				return nil, err
			}
			return c, nil
		}
	}
	return e.forkChild(ctx, src, snap)
}

// take removes a live spare of name from the pool (nil when none).
func (p *snapPool) take(name string) *Sandbox {
	for {
		p.mu.Lock()
		r := p.ready[name]
		if len(r) == 0 {
			p.st.Misses++
			p.mu.Unlock()
			return nil
		}
		c := r[len(r)-1]
		p.ready[name] = r[:len(r)-1]
		p.mu.Unlock()
		if c.sbox().Alive() {
			p.mu.Lock()
			p.st.Hits++
			p.mu.Unlock()
			return c
		}
		c.discard() // killed from outside while it waited
	}
}

// keep records how many spares name should have (n > 0; bounded by
// Config.Spares) and refills it.
func (p *snapPool) keep(name string, n int) {
	max := p.e.cfg.Spares
	p.mu.Lock()
	if n > 0 {
		p.want[name] = min(n, max)
	}
	missing := p.want[name] - len(p.ready[name]) - p.making[name]
	missing = min(missing, max-p.used())
	if p.closed || missing <= 0 {
		p.mu.Unlock()
		return
	}
	p.making[name] += missing
	p.wg.Add(1)
	p.mu.Unlock()
	go p.refill(name, missing)
}

// used is the spares ready and being made. p.mu must be held.
func (p *snapPool) used() int {
	n := 0
	for _, r := range p.ready {
		n += len(r)
	}
	for _, m := range p.making {
		n += m
	}
	return n
}

// refill starts n spares of name, one after another, stopping at the
// first failure (no room, the snapshot deleted, the pool closing).
func (p *snapPool) refill(name string, n int) {
	defer p.wg.Done()
	start := time.Now()
	for i := range n {
		c, err := p.start(name)
		p.mu.Lock()
		p.making[name]--
		if err != nil {
			p.st.Failed++
			p.making[name] -= n - i - 1
			closed := p.closed
			p.mu.Unlock()
			if !closed {
				p.e.log.Warn("starting a spare of a snapshot failed", "snapshot", name, "err", err)
			}
			break
		}
		if p.closed || p.want[name] == 0 { // closing, or the snapshot deleted
			p.making[name] -= n - i - 1
			p.mu.Unlock()
			c.discard()
			break
		}
		p.st.Made++
		p.ready[name] = append(p.ready[name], c)
		p.mu.Unlock()
	}
	p.mu.Lock()
	if p.making[name] <= 0 {
		delete(p.making, name)
	}
	p.st.Refills++
	p.st.RefillTime += time.Since(start)
	p.mu.Unlock()
}

// start starts one spare of the named snapshot as a fork of it would.
func (p *snapPool) start(name string) (*Sandbox, error) {
	src, snap, done, err := p.e.snapshotSource(p.ctx, name)
	if err != nil {
		return nil, err
	}
	defer done()
	return p.e.startChild(p.ctx, src, snap)
}

// drop closes the spares of a deleted snapshot and keeps none for it.
func (p *snapPool) drop(name string) {
	p.mu.Lock()
	ready := p.ready[name]
	delete(p.ready, name)
	delete(p.want, name)
	p.mu.Unlock()
	for _, c := range ready {
		c.discard()
	}
}

// close stops the refills, waits for them and closes every spare.
func (p *snapPool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	ready := p.ready
	p.ready = map[string][]*Sandbox{}
	p.mu.Unlock()
	for _, r := range ready {
		for _, c := range r {
			c.discard()
		}
	}
}

// discard closes a sandbox that was never registered (a spare, a child
// whose start failed) and gives its room back.
func (s *Sandbox) discard() {
	s.closeOnce.Do(func() {
		s.closeErr = closeParts(s.parts())
		s.release()
	})
}
