package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/api"
)

// admission bounds what live sandboxes reserve together: memory (their
// memory limits), disk (their disk limits) and their number. A request
// that does not fit waits in line (first come, first served, so a large
// one is not starved by small ones) for as long as it may.
type admission struct {
	memBudget  int64 // <= 0: memory is not admitted
	diskBudget int64 // <= 0: disk is not admitted
	maxCount   int   // <= 0: any number

	mu       sync.Mutex // guards the fields below
	mem      int64
	disk     int64
	count    int
	waiting  []*waiter
	rejected map[string]int64 // by resource, for the stats
}

type waiter struct {
	mem, disk int64
	ready     chan struct{} // closed once admitted
}

func newAdmission(mem, disk int64, count int) *admission {
	return &admission{memBudget: mem, diskBudget: disk, maxCount: count, rejected: map[string]int64{}}
}

// fits says whether mem and disk fit now, with a reason when they do not.
// a.mu must be held.
func (a *admission) fits(mem, disk int64) (bool, string) {
	switch {
	case a.maxCount > 0 && a.count >= a.maxCount:
		return false, fmt.Sprintf("sandboxes: %d of %d live (max sandboxes)", a.count, a.maxCount)
	case a.memBudget > 0 && a.mem+mem > a.memBudget:
		return false, fmt.Sprintf("memory: %d MiB of %d MiB reserved and this sandbox needs %d MiB (memory budget)", a.mem>>20, a.memBudget>>20, mem>>20)
	case a.diskBudget > 0 && a.disk+disk > a.diskBudget:
		return false, fmt.Sprintf("disk: %d MiB of %d MiB reserved and this sandbox needs %d MiB (disk budget)", a.disk>>20, a.diskBudget>>20, disk>>20)
	}
	return true, ""
}

func (a *admission) take(mem, disk int64) {
	a.mem += mem
	a.disk += disk
	a.count++
}

// acquire reserves mem and disk for one sandbox. wait < 0: fail at once
// (ErrQuota) when they do not fit; wait 0: wait until ctx ends; wait > 0:
// at most that long. A request larger than a whole budget fails with
// ErrTooLarge.
func (a *admission) acquire(ctx context.Context, mem, disk int64, wait time.Duration) (release func(), err error) {
	if a.memBudget > 0 && mem > a.memBudget {
		return nil, fmt.Errorf("%w: a memory limit of %d MiB, and the budget is %d MiB (lower the limit or raise the budget)", ErrTooLarge, mem>>20, a.memBudget>>20)
	}
	if a.diskBudget > 0 && disk > a.diskBudget {
		return nil, fmt.Errorf("%w: a disk limit of %d MiB, and the disk budget is %d MiB (lower the limit or raise the budget)", ErrTooLarge, disk>>20, a.diskBudget>>20)
	}
	if a.diskBudget > 0 && disk <= 0 {
		return nil, fmt.Errorf("%w: a disk budget is set, so every sandbox needs a disk limit (limits.disk_bytes, or a default --disk)", ErrBadRequest)
	}
	release = func() { a.release(mem, disk) }
	a.mu.Lock()
	ok, why := a.fits(mem, disk)
	if ok && len(a.waiting) == 0 {
		a.take(mem, disk)
		a.mu.Unlock()
		return release, nil
	}
	if wait < 0 {
		a.rejected[resource(why)]++
		a.mu.Unlock()
		return nil, fmt.Errorf("%w: no room for a sandbox now: %s", ErrQuota, orQueue(why))
	}
	w := &waiter{mem: mem, disk: disk, ready: make(chan struct{})}
	a.waiting = append(a.waiting, w)
	a.mu.Unlock()

	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-w.ready:
		return release, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-timeout:
		err = fmt.Errorf("%w: no room for a sandbox within %s", ErrQuota, wait)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-w.ready: // admitted meanwhile: give it back
		a.mem, a.disk, a.count = a.mem-mem, a.disk-disk, a.count-1
		a.grant()
		return nil, err
	default:
	}
	for i, x := range a.waiting {
		if x == w {
			a.waiting = append(a.waiting[:i], a.waiting[i+1:]...)
			break
		}
	}
	_, why = a.fits(mem, disk)
	a.rejected[resource(why)]++
	a.grant() // the head may fit now that this one left
	if errors.Is(err, ErrQuota) {
		err = fmt.Errorf("%w: %s", err, orQueue(why))
	}
	return nil, err
}

func (a *admission) release(mem, disk int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.mem, a.disk, a.count = a.mem-mem, a.disk-disk, a.count-1
	a.grant()
}

// grant admits waiters in order while the first one fits. a.mu must be held.
func (a *admission) grant() {
	for len(a.waiting) > 0 {
		w := a.waiting[0]
		if ok, _ := a.fits(w.mem, w.disk); !ok {
			return
		}
		a.take(w.mem, w.disk)
		a.waiting = a.waiting[1:]
		close(w.ready)
	}
}

// quota reports the budgets and what is reserved.
func (a *admission) quota() api.Quota {
	a.mu.Lock()
	defer a.mu.Unlock()
	return api.Quota{MaxSandboxes: a.maxCount, Sandboxes: a.count, MemoryBytes: max(a.memBudget, 0), MemoryUsedBytes: a.mem,
		DiskBytes: max(a.diskBudget, 0), DiskUsedBytes: a.disk}
}

func (a *admission) rejections() map[string]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int64, len(a.rejected))
	for k, v := range a.rejected {
		out[k] = v
	}
	return out
}

// resource names the resource of a fits reason ("" : others were first).
func resource(why string) string {
	for _, r := range []string{"sandboxes", "memory", "disk"} {
		if len(why) >= len(r) && why[:len(r)] == r {
			return r
		}
	}
	return "queue"
}

func orQueue(why string) string {
	if why == "" {
		return "other sandboxes are waiting first"
	}
	return why
}
