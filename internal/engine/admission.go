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
// that does not fit waits in line (first come, first served within its
// class, so a large one is not starved by small ones) for as long as it may.
//
// Room for grading is held back from agents' sandboxes: a sandbox's
// evaluate grades in a second, fresh sandbox while the agent's is still
// open, so if agents could fill every slot, agents all evaluating at once
// would each wait for room only their own close frees. Agents may use the
// budgets minus the grading reserve; evaluations may use all of them, and
// wait only on other evaluations, which end.
type admission struct {
	memBudget  int64 // <= 0: memory is not admitted
	diskBudget int64 // <= 0: disk is not admitted
	maxCount   int   // <= 0: any number
	reserve    share // held back for evaluations (see holdBack)
	graders    int   // the evaluations reserve holds room for

	mu       sync.Mutex // guards the fields below
	mem      int64
	disk     int64
	count    int
	waiting  []*waiter
	rejected map[string]int64 // by resource, for the stats
}

// class is whom a reservation is for.
type class int

const (
	agentClass   class = iota // an agent's sandbox: not the grading reserve
	gradingClass              // an evaluation's sandbox: the whole budgets
)

// share is an amount of each budget.
type share struct {
	mem, disk int64
	count     int
}

type waiter struct {
	mem, disk int64
	class     class
	ready     chan struct{} // closed once admitted
}

func newAdmission(mem, disk int64, count int) *admission {
	return &admission{memBudget: mem, diskBudget: disk, maxCount: count, rejected: map[string]int64{}}
}

// holdBack keeps room for n evaluation sandboxes of mem and disk that
// agents' sandboxes cannot take, as much of it as still leaves room for
// one agent's sandbox of the same size. It returns the evaluations held
// back for: 0 when nothing bounds the sandboxes or the budgets hold only
// one.
func (a *admission) holdBack(n int, mem, disk int64) int {
	if a.maxCount > 0 {
		n = min(n, a.maxCount-1)
	}
	if a.memBudget > 0 && mem > 0 {
		n = min(n, int(a.memBudget/mem)-1)
	}
	if a.diskBudget > 0 && disk > 0 {
		n = min(n, int(a.diskBudget/disk)-1)
	}
	if a.maxCount <= 0 && a.memBudget <= 0 && a.diskBudget <= 0 {
		n = 0 // nothing bounded: nothing to hold back
	}
	a.graders, a.reserve = max(n, 0), share{}
	if a.maxCount > 0 {
		a.reserve.count = a.graders
	}
	if a.memBudget > 0 {
		a.reserve.mem = int64(a.graders) * mem
	}
	if a.diskBudget > 0 {
		a.reserve.disk = int64(a.graders) * disk
	}
	return a.graders
}

// room is what class c may reserve in all.
func (a *admission) room(c class) share {
	r := share{mem: a.memBudget, disk: a.diskBudget, count: a.maxCount}
	if c == agentClass {
		r.mem, r.disk, r.count = r.mem-a.reserve.mem, r.disk-a.reserve.disk, r.count-a.reserve.count
	}
	return r
}

// fits says whether mem and disk fit now for class c, with a reason when
// they do not. a.mu must be held.
func (a *admission) fits(mem, disk int64, c class) (bool, string) {
	r := a.room(c)
	held := ""
	if c == agentClass && a.graders > 0 {
		held = fmt.Sprintf(", room for %d held back for grading", a.graders)
	}
	switch {
	case a.maxCount > 0 && a.count >= r.count:
		return false, fmt.Sprintf("sandboxes: %d of %d live%s (max sandboxes)", a.count, a.maxCount, held)
	case a.memBudget > 0 && a.mem+mem > r.mem:
		return false, fmt.Sprintf("memory: %d MiB of %d MiB reserved%s and this sandbox needs %d MiB (memory budget)", a.mem>>20, a.memBudget>>20, held, mem>>20)
	case a.diskBudget > 0 && a.disk+disk > r.disk:
		return false, fmt.Sprintf("disk: %d MiB of %d MiB reserved%s and this sandbox needs %d MiB (disk budget)", a.disk>>20, a.diskBudget>>20, held, disk>>20)
	}
	return true, ""
}

func (a *admission) take(mem, disk int64) {
	a.mem += mem
	a.disk += disk
	a.count++
}

// queued says whether a request of class c is waiting. a.mu must be held.
func (a *admission) queued(c class) bool {
	for _, w := range a.waiting {
		if w.class == c {
			return true
		}
	}
	return false
}

// acquire reserves mem and disk for one sandbox of class c. wait < 0: fail
// at once (ErrQuota) when they do not fit; wait 0: wait until ctx ends;
// wait > 0: at most that long. A request larger than a whole budget fails
// with ErrTooLarge.
func (a *admission) acquire(ctx context.Context, mem, disk int64, wait time.Duration, c class) (release func(), err error) {
	if err := a.check(mem, disk); err != nil {
		return nil, err
	}
	release = func() { a.release(mem, disk) }
	a.mu.Lock()
	ok, why := a.fits(mem, disk, c)
	if ok && !a.queued(c) {
		a.take(mem, disk)
		a.mu.Unlock()
		return release, nil
	}
	if wait < 0 {
		a.rejected[resource(why)]++
		a.mu.Unlock()
		return nil, fmt.Errorf("%w: no room for a sandbox now: %s", ErrQuota, orQueue(why))
	}
	w := &waiter{mem: mem, disk: disk, class: c, ready: make(chan struct{})}
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
	return nil, a.leave(w, err)
}

// check refuses a request that no state of the budgets could admit.
func (a *admission) check(mem, disk int64) error {
	if a.memBudget > 0 && mem > a.memBudget {
		return fmt.Errorf("%w: a memory limit of %d MiB, and the budget is %d MiB (lower the limit or raise the budget)", ErrTooLarge, mem>>20, a.memBudget>>20)
	}
	if a.diskBudget > 0 && disk > a.diskBudget {
		return fmt.Errorf("%w: a disk limit of %d MiB, and the disk budget is %d MiB (lower the limit or raise the budget)", ErrTooLarge, disk>>20, a.diskBudget>>20)
	}
	if a.diskBudget > 0 && disk <= 0 {
		return fmt.Errorf("%w: a disk budget is set, so every sandbox needs a disk limit (limits.disk_bytes, or a default --disk)", ErrBadRequest)
	}
	return nil
}

// beside refuses an evaluation of mem and disk that could never be
// admitted while a sandbox holding held stays open (the budgets cannot
// hold both): waiting for it would wait for that sandbox's own close.
func (a *admission) beside(held share, mem, disk int64) error {
	why := ""
	switch {
	case a.maxCount > 0 && a.maxCount < 2:
		why = fmt.Sprintf("max sandboxes %d", a.maxCount)
	case a.memBudget > 0 && held.mem+mem > a.memBudget:
		why = fmt.Sprintf("memory budget %d MiB, this sandbox %d MiB, the grading sandbox %d MiB", a.memBudget>>20, held.mem>>20, mem>>20)
	case a.diskBudget > 0 && held.disk+disk > a.diskBudget:
		why = fmt.Sprintf("disk budget %d MiB, this sandbox %d MiB, the grading sandbox %d MiB", a.diskBudget>>20, held.disk>>20, disk>>20)
	default:
		return nil
	}
	return fmt.Errorf("%w: grading needs a second sandbox beside this one and the budgets cannot hold both (%s): close this sandbox and grade its diff as a job (POST /v1/jobs), or raise the budget", ErrTooLarge, why)
}

// leave takes w out of the line after its wait ended with err, giving back
// what it was admitted meanwhile, and returns the error to report.
func (a *admission) leave(w *waiter, err error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-w.ready: // admitted meanwhile: give it back
		a.mem, a.disk, a.count = a.mem-w.mem, a.disk-w.disk, a.count-1
		a.grant()
		return err
	default:
	}
	for i, x := range a.waiting {
		if x == w {
			a.waiting = append(a.waiting[:i], a.waiting[i+1:]...)
			break
		}
	}
	_, why := a.fits(w.mem, w.disk, w.class)
	a.rejected[resource(why)]++
	a.grant() // the head may fit now that this one left
	if errors.Is(err, ErrQuota) {
		err = fmt.Errorf("%w: %s", err, orQueue(why))
	}
	return err
}

// tryTake reserves mem and disk for one more sandbox of class c only if
// they fit now and nobody waits in line; it never waits and counts no
// rejection. An evaluation's integrity canary asks so for its sandbox
// beside the evaluation's own (task.EvalOptions.Beside): refused, it runs
// later in the evaluation's own room.
func (a *admission) tryTake(mem, disk int64, c class) (release func(), ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if fits, _ := a.fits(mem, disk, c); !fits || len(a.waiting) > 0 {
		return nil, false
	}
	a.take(mem, disk)
	var once sync.Once
	return func() { once.Do(func() { a.release(mem, disk) }) }, true
}

func (a *admission) release(mem, disk int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.mem, a.disk, a.count = a.mem-mem, a.disk-disk, a.count-1
	a.grant()
}

// grant admits waiters in order while the first of each class fits: an
// agent that does not fit never holds an evaluation up. a.mu must be held.
func (a *admission) grant() {
	var blocked [2]bool
	kept := a.waiting[:0]
	for _, w := range a.waiting {
		if !blocked[w.class] {
			if ok, _ := a.fits(w.mem, w.disk, w.class); ok {
				a.take(w.mem, w.disk)
				close(w.ready)
				continue
			}
			blocked[w.class] = true
		}
		kept = append(kept, w)
	}
	clear(a.waiting[len(kept):])
	a.waiting = kept
}

// waitingNow is how many requests wait.
func (a *admission) waitingNow() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.waiting)
}

// quota reports the budgets and what is reserved.
func (a *admission) quota() api.Quota {
	a.mu.Lock()
	defer a.mu.Unlock()
	return api.Quota{MaxSandboxes: a.maxCount, Sandboxes: a.count, MemoryBytes: max(a.memBudget, 0), MemoryUsedBytes: a.mem,
		DiskBytes: max(a.diskBudget, 0), DiskUsedBytes: a.disk, GradingReserve: a.graders}
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
