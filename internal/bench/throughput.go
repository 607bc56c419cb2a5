package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// throughput counts tasks created, answered (the first command, not the
// real task, through the shell the task keeps) and closed (the whole
// teardown) per second with each worker count: every method runs for Duration per worker count,
// split into ThroughputRounds slices interleaved with the other methods'.
// A slice's rate is the tasks it finished over its wall time (until its
// last in-flight task is closed, and for msb-api until the daemon has
// cleaned up after every sandbox the slice deleted).
func (b *bencher) throughput(ctx context.Context, w *workload) {
	ms := b.methods(w, true)
	if b.api != nil && w.bare() {
		ms = append(ms, b.api)
	}
	byName, names := index(ms)
	slice := b.o.Duration / time.Duration(b.o.ThroughputRounds)
	for _, workers := range b.o.Workers {
		param := fmt.Sprintf("workers=%d", workers)
		failed := interleave(ctx, b.o.ThroughputRounds, 0, names, func(ctx context.Context, round, slot int, name string) error {
			n, el, err := runFor(ctx, byName[name], workers, slice, w.answer)
			if err != nil {
				return err
			}
			b.add(Sample{Key: Key{Measure: MeasureThroughput, Workload: w.name, Method: name, Phase: "cycle", Cache: Warm, Param: param},
				Round: round, Slot: slot, Value: float64(n) / el.Seconds(), Unit: UnitPerSec})
			return nil
		})
		b.failures(MeasureThroughput, w, failed)
	}
}

// runFor runs create→command→close cycles of m on workers goroutines until
// d has passed, and returns how many finished and the time until the last
// one did (and what it left to the background, for a drainer, was done).
// The first error stops every worker.
func runFor(ctx context.Context, m method, workers int, d time.Duration, command string) (int, time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var done, next atomic.Int64
	var once sync.Once
	var firstErr error
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if _, err := lifeOf(ctx, m, int(next.Add(1)), command, ""); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if d, ok := m.(drainer); ok && firstErr == nil {
		firstErr = d.drain(ctx)
	}
	return int(done.Load()), time.Since(start), firstErr
}
