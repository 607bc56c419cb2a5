package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAdmissionHoldBack: the reserve is what leaves room for one agent's
// sandbox, and nothing where nothing is bounded.
func TestAdmissionHoldBack(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mem, disk int64
		count, n  int
		want      int
	}{
		{"unbounded", -1, 0, 0, 1, 0},
		{"slots", -1, 0, 4, 1, 1},
		{"one slot", -1, 0, 1, 1, 0},
		{"two asked of three slots", -1, 0, 3, 2, 2},
		{"memory for two", 2 << 30, 0, 0, 1, 1},
		{"memory for one", 1 << 30, 0, 0, 1, 0},
		{"disk for one", -1, 1 << 30, 0, 1, 0},
		{"none asked", -1, 0, 4, 0, 0},
	} {
		a := newAdmission(tc.mem, tc.disk, tc.count)
		if got := a.holdBack(tc.n, 1<<30, 1<<30); got != tc.want || a.quota().GradingReserve != tc.want {
			t.Errorf("%s: holdBack = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestAdmissionClasses: an agent waiting for room never holds up an
// evaluation behind it, which may use the reserve; agents may not.
func TestAdmissionClasses(t *testing.T) {
	a := newAdmission(-1, 0, 2)
	a.holdBack(1, 1<<30, 0)
	ctx := context.Background()
	agent, err := a.acquire(ctx, 1<<30, 0, -1, agentClass)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.acquire(ctx, 1<<30, 0, -1, agentClass); !errors.Is(err, ErrQuota) {
		t.Fatalf("a second agent: %v", err)
	}
	queued := make(chan error, 1)
	go func() {
		release, err := a.acquire(ctx, 1<<30, 0, time.Minute, agentClass)
		if err == nil {
			release()
		}
		queued <- err
	}()
	for a.waitingNow() == 0 {
		time.Sleep(time.Millisecond)
	}
	grading, err := a.acquire(ctx, 1<<30, 0, time.Second, gradingClass)
	if err != nil {
		t.Fatalf("an evaluation behind a waiting agent: %v", err)
	}
	if _, err := a.acquire(ctx, 1<<30, 0, -1, gradingClass); !errors.Is(err, ErrQuota) {
		t.Fatalf("a second evaluation over the bound: %v", err)
	}
	grading()
	agent() // the waiting agent's turn
	if err := <-queued; err != nil {
		t.Fatalf("the waiting agent: %v", err)
	}
	if q := a.quota(); q.Sandboxes != 0 || a.waitingNow() != 0 {
		t.Fatalf("left reserved: %+v", q)
	}
}

// TestAdmissionTryTake: a canary's sandbox is admitted beside its
// evaluation's only when it fits now and nobody waits; it never waits,
// counts no rejection, and gives its room back once.
func TestAdmissionTryTake(t *testing.T) {
	a := newAdmission(-1, 0, 2)
	ctx := context.Background()
	if _, err := a.acquire(ctx, 0, 0, -1, gradingClass); err != nil {
		t.Fatal(err)
	}
	beside, ok := a.tryTake(0, 0, gradingClass)
	if !ok {
		t.Fatal("no room beside the first evaluation")
	}
	if _, ok := a.tryTake(0, 0, gradingClass); ok {
		t.Fatal("a third sandbox admitted beside two of two")
	}
	beside()
	beside() // given back once
	if a.count != 1 || len(a.rejections()) != 0 {
		t.Fatalf("count %d rejections %v after the canary, want 1 and none", a.count, a.rejections())
	}
	a.mu.Lock()
	a.waiting = append(a.waiting, &waiter{class: agentClass, ready: make(chan struct{})})
	a.mu.Unlock()
	if _, ok := a.tryTake(0, 0, gradingClass); ok {
		t.Fatal("a canary's sandbox admitted, with room, ahead of a request in line")
	}
}
