package engine

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
)

// MaxBatchCount bounds the sandboxes of one CreateSandboxes.
const MaxBatchCount = MaxForkCount

// batchWorkers is how many sandboxes of a batch start at once, as a
// fork's children do (forkWorkers).
const batchWorkers = forkWorkers

// CreateSandboxes creates count sandboxes of req, batchWorkers at a time,
// each admitted as CreateSandbox admits one: all or none. On the first
// failure the starts not yet begun are not made, those made are closed,
// and the error (ErrQuota naming the limit when a sandbox found no room)
// says which sandbox of the batch failed.
func (e *Engine) CreateSandboxes(ctx context.Context, req SandboxRequest, count int) ([]*Sandbox, error) {
	if count < 1 || count > MaxBatchCount {
		return nil, fmt.Errorf("%w: batch count %d: give 1 to %d", ErrBadRequest, count, MaxBatchCount)
	}
	made := make([]*Sandbox, count)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(batchWorkers)
	for i := range made {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err // another failed: make no more
			}
			sb, err := e.CreateSandbox(gctx, req)
			if err != nil {
				return fmt.Errorf("creating sandbox %d of %d: %w", i+1, count, err)
			}
			made[i] = sb
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		for _, sb := range made {
			if sb != nil {
				sb.Close()
			}
		}
		return nil, err
	}
	e.log.Debug("batch created", "sandboxes", count, "instance", req.InstanceID)
	return made, nil
}
