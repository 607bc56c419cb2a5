package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	b := NewBudget(100)
	ctx := t.Context()
	if err := b.Acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	// 50 does not fit: a waiter with a deadline gives up, and its leaving
	// does not leak budget.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := b.Acquire(short, 50); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire over the limit: %v", err)
	}
	if got := b.InUse(); got != 60 {
		t.Fatalf("in use %d, want 60", got)
	}
	// First come, first served: a small request that would fit waits
	// behind a big one that does not.
	waiting := func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.waiters.Len()
	}
	var wg sync.WaitGroup
	wg.Go(func() { b.Acquire(ctx, 80) })
	for waiting() != 1 {
		time.Sleep(time.Millisecond)
	}
	wg.Go(func() { b.Acquire(ctx, 10) })
	for waiting() != 2 {
		time.Sleep(time.Millisecond)
	}
	if got := b.InUse(); got != 60 {
		t.Fatalf("in use %d while both wait, want 60 (10 overtook 80)", got)
	}
	b.Release(60)
	wg.Wait()
	if got := b.InUse(); got != 90 {
		t.Fatalf("in use %d after both were granted, want 90", got)
	}
	b.Release(80)
	b.Release(10)
	// A request bigger than the whole budget runs alone.
	if err := b.Acquire(ctx, 1000); err != nil || b.InUse() != 100 {
		t.Fatalf("oversized acquire: %v, in use %d", err, b.InUse())
	}
	b.Release(1000)
	var nilBudget *Budget
	if err := nilBudget.Acquire(ctx, 1<<40); err != nil {
		t.Fatal(err)
	}
	nilBudget.Release(1 << 40)
}

func TestBudgetBoundsCommit(t *testing.T) {
	b := NewBudget(1 << 20)
	var peak atomic.Int64
	s, err := OpenOptions(t.TempDir()+"/c", Options{Budget: b, Workers: 8})
	if err != nil {
		t.Fatal(err)
	}
	s.hooks.wrapWriter = func(w ioWriter) ioWriter {
		if u := b.InUse(); u > peak.Load() {
			peak.Store(u)
		}
		return w
	}
	nodes := map[string]node{}
	for i := range 64 {
		nodes[string(rune('a'+i%26))+string(rune('a'+i/26))] = node{content: string(make([]byte, 300<<10)) + string(rune(i))}
	}
	src := t.TempDir()
	writeTree(t, src, nodes)
	if _, err := s.CommitDir(t.Context(), src, CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p == 0 || p > b.Limit() {
		t.Fatalf("peak bytes in flight %d, limit %d", p, b.Limit())
	}
	if b.InUse() != 0 {
		t.Fatalf("budget leaked %d bytes", b.InUse())
	}
}
