package store

import (
	"container/list"
	"context"
	"sync"
)

// Budget bounds the bytes of I/O in flight, like a weighted semaphore:
// Acquire(n) waits until n more bytes fit under the limit, Release(n) gives
// them back. Waiters are served first come, first served, so a large request
// is not starved by small ones. A request larger than the limit is reduced
// to the limit, so it runs alone rather than never. A nil *Budget never
// blocks.
type Budget struct {
	limit int64

	mu      sync.Mutex // guards used and waiters
	used    int64
	waiters list.List // of *budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed when the bytes are granted
}

// NewBudget returns a budget of limit bytes (at least 1).
func NewBudget(limit int64) *Budget {
	return &Budget{limit: max(limit, 1)}
}

// Limit returns the budget's size in bytes.
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

func (b *Budget) clamp(n int64) int64 { return min(max(n, 0), b.limit) }

// Acquire waits for n bytes of budget or for ctx to be done. On success the
// caller must Release(n) with the same n.
func (b *Budget) Acquire(ctx context.Context, n int64) error {
	if b == nil {
		return nil
	}
	n = b.clamp(n)
	b.mu.Lock()
	if b.waiters.Len() == 0 && b.used+n <= b.limit {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	elem := b.waiters.PushBack(w)
	b.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready:
			// Granted while we gave up: hand the bytes back.
			b.used -= n
			b.grantLocked()
		default:
			b.waiters.Remove(elem)
			// Our leaving may let the next waiters in.
			b.grantLocked()
		}
		b.mu.Unlock()
		return ctx.Err()
	}
}

// Release returns n bytes acquired earlier.
func (b *Budget) Release(n int64) {
	if b == nil {
		return
	}
	n = b.clamp(n)
	b.mu.Lock()
	b.used -= n
	if b.used < 0 {
		b.mu.Unlock()
		panic("store: Budget.Release of more than was acquired")
	}
	b.grantLocked()
	b.mu.Unlock()
}

// InUse returns the bytes currently acquired.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// grantLocked wakes waiters in order while they fit. b.mu must be held.
func (b *Budget) grantLocked() {
	for {
		front := b.waiters.Front()
		if front == nil {
			return
		}
		w := front.Value.(*budgetWaiter)
		if b.used+w.n > b.limit {
			return
		}
		b.used += w.n
		b.waiters.Remove(front)
		close(w.ready)
	}
}
