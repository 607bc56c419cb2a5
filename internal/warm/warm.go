// Package warm keeps values that are slow to make (task sandboxes in their
// starting state) made ahead of need, so that taking one costs nothing.
//
// Nouns:
//   - a key says what a value is for (an instance and its sandbox's shape);
//     values of one key are interchangeable.
//   - a spare is a value made for a key and not yet taken. Nothing has used
//     it: taking it is the same as making a new one, only earlier.
//   - the Pool holds at most Max spares (made or being made) in all and
//     PerKey per key. Refill(key) tops a key up, evicting (closing) the
//     spares of the keys refilled longest ago when Max is reached, so the
//     spares follow the keys asked for most recently. A spare nobody took
//     for Idle is closed by Expire.
package warm

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Options configure a Pool.
type Options[K comparable, T any] struct {
	// Make makes a value for key; ctx ends when the pool closes.
	Make func(ctx context.Context, key K) (T, error)
	// Close disposes of a spare that will not be taken.
	Close func(T)
	// Max bounds the spares in all, made or being made (<= 0: the pool
	// keeps none and Take always misses).
	Max int
	// PerKey bounds the spares of one key (default 1).
	PerKey int
	// Idle is how long a spare may wait to be taken (0: forever).
	Idle time.Duration
	// Logger receives failed makes (default: discarded).
	Logger *slog.Logger
}

// Stats count what a pool did since it was made.
type Stats struct {
	Spares  int   // ready now
	Making  int   // being made now
	Hits    int64 // Takes that got a spare
	Misses  int64 // Takes that did not
	Made    int64 // spares made
	Failed  int64 // makes that failed
	Evicted int64 // spares closed to make room for another key's
	Expired int64 // spares closed after Idle
}

// Pool keeps spares. Its methods are safe for concurrent use.
type Pool[K comparable, T any] struct {
	o      Options[K, T]
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // makes in flight

	mu     sync.Mutex // guards the fields below
	closed bool
	spares []spare[K, T] // oldest refill first
	making map[K]int
	st     Stats
}

type spare[K comparable, T any] struct {
	key K
	v   T
	at  time.Time // when it was made
}

// New makes an empty pool.
func New[K comparable, T any](o Options[K, T]) *Pool[K, T] {
	if o.PerKey <= 0 {
		o.PerKey = 1
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool[K, T]{o: o, ctx: ctx, cancel: cancel, making: map[K]int{}}
}

// Take returns a spare of key and true, or false when there is none.
func (p *Pool[K, T]) Take(key K) (T, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, s := range p.spares {
		if s.key == key {
			p.spares = append(p.spares[:i], p.spares[i+1:]...)
			p.st.Hits++
			return s.v, true
		}
	}
	p.st.Misses++
	var zero T
	return zero, false
}

// Refill starts making spares of key in the background until it has
// PerKey, evicting the spares refilled longest ago when Max is reached. A
// key whose spares are all being made is left as it is.
func (p *Pool[K, T]) Refill(key K) {
	var evict []T
	p.mu.Lock()
	if p.closed || p.o.Max <= 0 {
		p.mu.Unlock()
		return
	}
	have := p.making[key]
	for _, s := range p.spares {
		if s.key == key {
			have++
		}
	}
	n := min(p.o.PerKey, p.o.Max) - have
	for ; n > 0; n-- {
		if p.used() >= p.o.Max {
			v, ok := p.evictOther(key)
			if !ok {
				break
			}
			evict = append(evict, v)
		}
		p.making[key]++
		p.wg.Add(1)
		go p.make(key)
	}
	p.mu.Unlock()
	for _, v := range evict {
		p.o.Close(v)
	}
}

// used is the spares made and being made. p.mu must be held.
func (p *Pool[K, T]) used() int {
	n := len(p.spares)
	for _, m := range p.making {
		n += m
	}
	return n
}

// evictOther removes the oldest spare of another key. p.mu must be held.
func (p *Pool[K, T]) evictOther(key K) (T, bool) {
	for i, s := range p.spares {
		if s.key != key {
			p.spares = append(p.spares[:i], p.spares[i+1:]...)
			p.st.Evicted++
			return s.v, true
		}
	}
	var zero T
	return zero, false
}

func (p *Pool[K, T]) make(key K) {
	defer p.wg.Done()
	v, err := p.o.Make(p.ctx, key)
	p.mu.Lock()
	p.making[key]--
	if p.making[key] == 0 {
		delete(p.making, key)
	}
	if err != nil {
		p.st.Failed++
		closed := p.closed
		p.mu.Unlock()
		if !closed {
			p.o.Logger.Warn("making a spare failed", "key", key, "err", err)
		}
		return
	}
	if p.closed {
		p.mu.Unlock()
		p.o.Close(v)
		return
	}
	p.st.Made++
	p.spares = append(p.spares, spare[K, T]{key: key, v: v, at: time.Now()})
	p.mu.Unlock()
}

// Expire closes the spares made longer than Idle before now.
func (p *Pool[K, T]) Expire(now time.Time) {
	if p.o.Idle <= 0 {
		return
	}
	var old []T
	p.mu.Lock()
	kept := p.spares[:0]
	for _, s := range p.spares {
		if now.Sub(s.at) >= p.o.Idle {
			old = append(old, s.v)
			p.st.Expired++
			continue
		}
		kept = append(kept, s)
	}
	clear(p.spares[len(kept):])
	p.spares = kept
	p.mu.Unlock()
	for _, v := range old {
		p.o.Close(v)
	}
}

// Stats reports what the pool did and holds.
func (p *Pool[K, T]) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.st
	st.Spares, st.Making = len(p.spares), p.used()-len(p.spares)
	return st
}

// Close stops the makes in flight, waits for them and closes every spare;
// the pool keeps none afterwards.
func (p *Pool[K, T]) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	spares := p.spares
	p.spares = nil
	p.mu.Unlock()
	for _, s := range spares {
		p.o.Close(s.v)
	}
}
