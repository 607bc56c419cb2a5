// Package warm keeps values that are slow to make (sandboxes in their
// starting state) made ahead of need, so that taking one costs nothing.
//
// Nouns:
//   - a key says what a value is for (an environment and its sandbox's
//     shape); values of one key are interchangeable. A key's class names
//     its kind for the stats (the engine's: instance, image, snapshot).
//   - a spare is a value made for a key and not yet taken. Nothing has used
//     it: taking it is the same as making a new one, only earlier.
//   - a key's size is how many spares it should have: what Keep asked for
//     it last, else Options.Size's default (0: none until asked).
//   - a refill makes the spares a key lacks, one after another, in the
//     background; its time runs from the Keep that started it to its last
//     make's end.
//   - the Pool holds at most Max spares (made or being made) in all. A
//     refill at Max evicts (closes) the spares of the keys refilled longest
//     ago, so the spares follow the keys asked for most recently. A spare
//     nobody took for Idle is closed by Expire; Shed closes the oldest one
//     to give its room to something else (it yields).
package warm

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// ErrSkip, wrapped in a Make's error, says the make was not worth doing
// now (no room for a spare, say): the refill stops as after a failure,
// which is logged only at debug level.
var ErrSkip = errors.New("spare not made")

// Options configure a Pool.
type Options[K comparable, T any] struct {
	// Make makes a value for key; ctx ends when the pool closes.
	Make func(ctx context.Context, key K) (T, error)
	// Close disposes of a spare that will not be taken.
	Close func(T)
	// Alive says whether a spare can still be taken (nil: always); Take
	// closes the dead ones it finds.
	Alive func(T) bool
	// Max bounds the spares in all, made or being made (<= 0: the pool
	// keeps none and Take always misses).
	Max int
	// Size is a key's size until Keep asks for one (nil: 1).
	Size func(K) int
	// Class names a key's kind in StatsBy (nil: every key is "").
	Class func(K) string
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
	Shed    int64 // spares closed to give their room to something else
	// Refills and RefillTime: refills ended and their time in all.
	Refills    int64
	RefillTime time.Duration
}

func (s *Stats) add(o Stats) {
	s.Spares += o.Spares
	s.Making += o.Making
	s.Hits += o.Hits
	s.Misses += o.Misses
	s.Made += o.Made
	s.Failed += o.Failed
	s.Evicted += o.Evicted
	s.Expired += o.Expired
	s.Shed += o.Shed
	s.Refills += o.Refills
	s.RefillTime += o.RefillTime
}

// Pool keeps spares. Its methods are safe for concurrent use.
type Pool[K comparable, T any] struct {
	o      Options[K, T]
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // refills in flight

	mu     sync.Mutex // guards the fields below
	closed bool
	spares []spare[K, T] // oldest first
	making map[K]int
	want   map[K]int // sizes Keep asked for
	epoch  map[K]int // bumped by Drop: a refill of an older epoch keeps nothing
	st     map[string]*Stats
}

type spare[K comparable, T any] struct {
	key K
	v   T
	at  time.Time // when it was made
}

// New makes an empty pool.
func New[K comparable, T any](o Options[K, T]) *Pool[K, T] {
	if o.Size == nil {
		o.Size = func(K) int { return 1 }
	}
	if o.Class == nil {
		o.Class = func(K) string { return "" }
	}
	if o.Alive == nil {
		o.Alive = func(T) bool { return true }
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool[K, T]{o: o, ctx: ctx, cancel: cancel, making: map[K]int{}, want: map[K]int{}, epoch: map[K]int{}, st: map[string]*Stats{}}
}

// stats is the counters of key's class. p.mu must be held.
func (p *Pool[K, T]) stats(key K) *Stats {
	c := p.o.Class(key)
	s := p.st[c]
	if s == nil {
		s = &Stats{}
		p.st[c] = s
	}
	return s
}

// Take returns a live spare of key and true, or false when there is none.
func (p *Pool[K, T]) Take(key K) (T, bool) {
	for {
		v, ok := p.take(key)
		if !ok || p.o.Alive(v) {
			return v, ok
		}
		p.o.Close(v) // died waiting (killed from outside): not a hit
		p.mu.Lock()
		p.stats(key).Hits--
		p.mu.Unlock()
	}
}

func (p *Pool[K, T]) take(key K) (T, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, s := range p.spares {
		if s.key == key {
			p.spares = append(p.spares[:i], p.spares[i+1:]...)
			p.stats(key).Hits++
			return s.v, true
		}
	}
	p.stats(key).Misses++
	var zero T
	return zero, false
}

// Refill starts making the spares key lacks (see Keep).
func (p *Pool[K, T]) Refill(key K) { p.Keep(key, 0) }

// Keep records n (> 0, bounded by Max) as key's size and starts a refill
// of what key lacks of its size; n 0 keeps the size recorded, or the
// default. A key whose spares are all there or being made is left as it is.
func (p *Pool[K, T]) Keep(key K, n int) {
	var evict []T
	p.mu.Lock()
	if p.closed || p.o.Max <= 0 {
		p.mu.Unlock()
		return
	}
	if n > 0 {
		p.want[key] = min(n, p.o.Max)
	}
	size, ok := p.want[key]
	if !ok {
		size = min(p.o.Size(key), p.o.Max)
	}
	missing := size - p.making[key] - p.count(key)
	started := 0
	for ; missing > 0; missing-- {
		if p.used()+started >= p.o.Max {
			v, ok := p.evictOther(key)
			if !ok {
				break
			}
			evict = append(evict, v)
		}
		started++
	}
	if started > 0 {
		p.making[key] += started
		p.wg.Add(1)
		go p.refill(key, started, p.epoch[key])
	}
	p.mu.Unlock()
	for _, v := range evict {
		p.o.Close(v)
	}
}

// count is key's spares ready. p.mu must be held.
func (p *Pool[K, T]) count(key K) int {
	n := 0
	for _, s := range p.spares {
		if s.key == key {
			n++
		}
	}
	return n
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
			p.stats(s.key).Evicted++
			return s.v, true
		}
	}
	var zero T
	return zero, false
}

// refill makes n spares of key, one after another so that it takes one
// core at most, stopping at the first failure (no room, the key's source
// gone, the pool closing) or when key is dropped.
func (p *Pool[K, T]) refill(key K, n, epoch int) {
	defer p.wg.Done()
	start := time.Now()
	for i := range n {
		v, err := p.o.Make(p.ctx, key)
		rest := n - i - 1
		p.mu.Lock()
		p.making[key]--
		st := p.stats(key)
		if err != nil {
			st.Failed++
			p.making[key] -= rest
			closed := p.closed
			p.mu.Unlock()
			switch {
			case closed:
			case errors.Is(err, ErrSkip):
				p.o.Logger.Debug("spare not made", "key", key, "err", err)
			default:
				p.o.Logger.Warn("making a spare failed", "key", key, "err", err)
			}
			break
		}
		if p.closed || p.epoch[key] != epoch {
			p.making[key] -= rest
			p.mu.Unlock()
			p.o.Close(v)
			break
		}
		st.Made++
		p.spares = append(p.spares, spare[K, T]{key: key, v: v, at: time.Now()})
		p.mu.Unlock()
	}
	p.mu.Lock()
	if p.making[key] <= 0 {
		delete(p.making, key)
	}
	st := p.stats(key)
	st.Refills++
	st.RefillTime += time.Since(start)
	p.mu.Unlock()
}

// Drop closes key's spares, forgets its size and keeps nothing a refill
// in flight makes for it (its source is gone).
func (p *Pool[K, T]) Drop(key K) {
	var gone []T
	p.mu.Lock()
	p.epoch[key]++
	delete(p.want, key)
	kept := p.spares[:0]
	for _, s := range p.spares {
		if s.key == key {
			gone = append(gone, s.v)
			continue
		}
		kept = append(kept, s)
	}
	clear(p.spares[len(kept):])
	p.spares = kept
	p.mu.Unlock()
	for _, v := range gone {
		p.o.Close(v)
	}
}

// Shed closes the oldest spare, of any key, to give its room to something
// else; it reports whether there was one.
func (p *Pool[K, T]) Shed() bool {
	p.mu.Lock()
	if len(p.spares) == 0 {
		p.mu.Unlock()
		return false
	}
	s := p.spares[0]
	p.spares = append(p.spares[:0], p.spares[1:]...)
	p.stats(s.key).Shed++
	p.mu.Unlock()
	p.o.Close(s.v)
	return true
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
			p.stats(s.key).Expired++
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

// Stats reports what the pool did and holds, all classes together.
func (p *Pool[K, T]) Stats() Stats {
	var all Stats
	for _, st := range p.StatsBy() {
		all.add(st)
	}
	return all
}

// StatsBy reports what the pool did and holds by class (a class appears
// once one of its keys was taken or kept).
func (p *Pool[K, T]) StatsBy() map[string]Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]Stats, len(p.st))
	for c, st := range p.st {
		out[c] = *st
	}
	add := func(key K, spares, making int) {
		c := p.o.Class(key)
		st := out[c]
		st.Spares += spares
		st.Making += making
		out[c] = st
	}
	for _, s := range p.spares {
		add(s.key, 1, 0)
	}
	for k, m := range p.making {
		add(k, 0, m)
	}
	return out
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
