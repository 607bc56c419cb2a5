package bench

import (
	"context"
	"fmt"
)

// spareMethod is msb with a spare: task i made ahead, as the engine's
// spares (msb serve --spares) are, before the round and untimed, so that
// its create is what a create that finds its spare costs. What making
// the spare costs is msb's create; the spare is what it buys.
type spareMethod struct {
	inner *msbMethod
	spare liveTask // made by makeAhead, for task of
	of    int
}

func (m *spareMethod) name() string { return MethodMSBSpare }

func (m *spareMethod) files(ctx context.Context, i int) ([]string, error) {
	return m.inner.files(ctx, i)
}

// makeAhead makes the spare of task i (untimed: ready calls it before
// the trial), closing one left from a task that did not take it.
func (m *spareMethod) makeAhead(ctx context.Context, i int) error {
	if m.spare != nil {
		if m.of == i {
			return nil
		}
		m.spare.close()
		m.spare = nil
	}
	t, err := m.inner.create(ctx, i)
	if err != nil {
		return fmt.Errorf("making the spare: %w", err)
	}
	m.spare, m.of = t, i
	return nil
}

func (m *spareMethod) create(ctx context.Context, i int) (liveTask, error) {
	if m.spare != nil && m.of == i {
		t := m.spare
		m.spare = nil
		return spareTask{t}, nil
	}
	return m.inner.create(ctx, i)
}

// spareTask is a spare taken: a liveTask without msb's phase timings,
// which are its making's, ahead of the round.
type spareTask struct{ liveTask }

// close closes a spare no round took.
func (m *spareMethod) close() error {
	if m.spare == nil {
		return nil
	}
	err := m.spare.close()
	m.spare = nil
	return err
}
