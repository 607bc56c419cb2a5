package engine

import (
	"context"
	"fmt"
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
		Make:   e.makeSpare,
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

// standbySession is the name of a spare's session started ahead: one a
// client cannot give (api.CheckSessionName), renamed to the client's
// name when it opens its first session.
const standbySession = "-standby"

// makeSpare is a spare: a task sandbox whose session shell is started
// ahead, so that the client's first session answers in a round trip
// instead of a shell's start (see Sandbox.openStandby).
func (e *Engine) makeSpare(ctx context.Context, k spareKey) (*task.Sandbox, error) {
	ts, err := e.makeTask(ctx, k)
	if err != nil {
		return nil, err
	}
	if err := ts.OpenSession(ctx, standbySession, sandbox.SessionOptions{}); err != nil {
		ts.Close()
		return nil, fmt.Errorf("starting the spare's session: %w", err)
	}
	return ts, nil
}

// refillDelay is how long after a create the instance's spare is made
// again: not beside the caller's first commands, which it would slow on a
// small machine (by 2.5 ms of 7.8 on two cores, msb bench api).
const refillDelay = 100 * time.Millisecond

// openTask is a task sandbox in its starting state: a spare when one is
// ready (nothing ran in it but its start and its standby session's shell;
// standby says so), else a new one; once it has one, the instance gets a
// spare again for the next create (not after a failure: the make would
// fail again).
func (e *Engine) openTask(ctx context.Context, k spareKey) (ts *task.Sandbox, standby bool, err error) {
	if e.cfg.Spares <= 0 {
		ts, err = e.makeTask(ctx, k)
		return ts, false, err
	}
	ts, ok := e.spares.Take(k)
	if ok && !ts.Alive() {
		ts.Close() // died waiting (killed from outside): make one
		ok = false
	}
	if !ok {
		if ts, err = e.makeTask(ctx, k); err != nil {
			return nil, false, err
		}
	}
	time.AfterFunc(refillDelay, func() { e.spares.Refill(k) })
	return ts, ok, nil
}
