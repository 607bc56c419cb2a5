package engine

import (
	"context"
	"time"

	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/task"
	"github.com/minisandbox/msb/internal/warm"
)

// spareKey is what makes task sandboxes interchangeable: the same task
// (an instance added again is a new one) with the same shape.
type spareKey struct {
	t         *task.Task
	limits    sandbox.Limits
	network   string
	maxOutput int
}

func (e *Engine) newSpares() *warm.Pool[spareKey, *task.Sandbox] {
	return warm.New(warm.Options[spareKey, *task.Sandbox]{
		Make:   e.makeTask,
		Close:  func(ts *task.Sandbox) { ts.Close() },
		Max:    e.cfg.Spares,
		PerKey: e.cfg.SparesPerInstance,
		Idle:   e.cfg.spareIdle(),
		Logger: e.log,
	})
}

func (e *Engine) makeTask(ctx context.Context, k spareKey) (*task.Sandbox, error) {
	return task.Open(ctx, e.env, k.t, task.Options{Limits: k.limits, MaxOutput: k.maxOutput, Network: k.network})
}

// refillDelay is how long after a create the instance's spare is made
// again: not beside the caller's first commands, which it would slow on a
// small machine (by 2.5 ms of 7.8 on two cores, msb bench api).
const refillDelay = 100 * time.Millisecond

// openTask is a task sandbox in its starting state: a spare when one is
// ready (nothing ran in it but its start), else a new one; once it has
// one, the instance gets a spare again for the next create (not after a
// failure: the make would fail again).
func (e *Engine) openTask(ctx context.Context, k spareKey) (*task.Sandbox, error) {
	if e.cfg.Spares <= 0 {
		return e.makeTask(ctx, k)
	}
	ts, ok := e.spares.Take(k)
	if ok && !ts.Alive() {
		ts.Close() // died waiting (killed from outside): make one
		ok = false
	}
	var err error
	if !ok {
		if ts, err = e.makeTask(ctx, k); err != nil {
			return nil, err
		}
	}
	time.AfterFunc(refillDelay, func() { e.spares.Refill(k) })
	return ts, nil
}
