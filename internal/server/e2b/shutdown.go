package e2b

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
)

// A shutdown pause is what a stopping daemon does with its running
// sandboxes when PauseAtShutdown gave it time for it: each is paused as
// pause() pauses it (the snapshot pausePrefix+id and its record), so a
// daemon started on the same cache lists it paused and resumes it with its
// files. Its processes end: msb snapshots files, not memory. Its client
// never asked for the pause, so the next daemon treats it as still
// running where it can: an envd call resumes it (as auto_resume would),
// and its timeout, stopped while no daemon ran, runs out its rest there
// (shutdownPauseEnded).

// shutdownPauses is how many sandboxes a shutdown pauses at once: a pause
// copies and hashes what its sandbox wrote, so more than a few at once
// only share the same disk and cores.
const shutdownPauses = 4

// PauseAtShutdown makes Serve, once it has stopped answering, pause every
// running sandbox within limit (0, New's default: leave them to the engine,
// which closes them and loses their files).
func (f *Front) PauseAtShutdown(limit time.Duration) { f.shutdownLimit = limit }

// gate counts the requests being served, so that a shutdown pauses the
// sandboxes a create or connect in flight is starting.
type gate struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0
}

// track counts the requests h serves.
func (g *gate) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		if g.n == 0 {
			g.idle = make(chan struct{})
		}
		g.n++
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			if g.n--; g.n == 0 {
				close(g.idle)
			}
			g.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

// wait returns once no request is served, or when ctx ends with how many
// still are.
func (g *gate) wait(ctx context.Context) (busy int) {
	g.mu.Lock()
	n, idle := g.n, g.idle
	g.mu.Unlock()
	if n == 0 {
		return 0
	}
	select {
	case <-idle:
		return 0
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.n
	}
}

// shutdown pauses the running sandboxes, when PauseAtShutdown asked for
// it, after the requests in flight (whose server has stopped) have ended.
// The error names the sandboxes it could not pause: the engine closes
// them, and their files are lost.
func (f *Front) shutdown() error {
	if f.shutdownLimit <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.shutdownLimit)
	defer cancel()
	if busy := f.inflight.wait(ctx); busy > 0 {
		f.log.Warn("e2b requests still in flight at the end of the shutdown pause's time", "requests", busy)
	}
	boxes := f.runningBoxes()
	if len(boxes) == 0 {
		return nil
	}
	f.log.Info("pausing the running e2b sandboxes before the daemon stops", "sandboxes", len(boxes), "limit", f.shutdownLimit)
	t0 := time.Now()
	failed := f.pauseAll(ctx, boxes)
	if len(failed) == 0 {
		f.log.Info("e2b sandboxes paused for the next daemon", "sandboxes", len(boxes), "took", time.Since(t0).Round(time.Millisecond))
		return nil
	}
	var why []string
	for _, id := range slices.Sorted(maps.Keys(failed)) {
		why = append(why, id+": "+failed[id].Error())
	}
	return fmt.Errorf("e2b: %d of %d running sandboxes were not paused at shutdown and are closed, their files lost (%s); where the time ran out, give the pauses more (--e2b-shutdown-pause)",
		len(failed), len(boxes), strings.Join(why, "; "))
}

// runningBoxes are the sandboxes that run (not paused, not closed).
func (f *Front) runningBoxes() []*box {
	f.mu.Lock()
	all := slices.Collect(maps.Values(f.boxes))
	f.mu.Unlock()
	var out []*box
	for _, b := range all {
		if _, paused := b.engineID(); !paused && !b.isClosed() {
			out = append(out, b)
		}
	}
	return out
}

// pauseAll pauses boxes, shutdownPauses at once, until ctx ends, and
// returns why each it did not pause failed (one killed meanwhile is no
// failure).
func (f *Front) pauseAll(ctx context.Context, boxes []*box) map[string]error {
	var (
		mu     sync.Mutex
		failed = map[string]error{}
		wg     sync.WaitGroup
		slots  = make(chan struct{}, shutdownPauses)
	)
	for _, b := range boxes {
		wg.Go(func() {
			err := func() error {
				select {
				case slots <- struct{}{}:
					defer func() { <-slots }()
				case <-ctx.Done():
					return fmt.Errorf("not started: %w", ctx.Err())
				}
				return f.pauseAtShutdown(ctx, b)
			}()
			if err == nil || errors.Is(err, errAlreadyPaused) || engine.Kind(err) == api.CodeNotFound || engine.Kind(err) == api.CodeGone {
				return
			}
			mu.Lock()
			failed[b.id] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return failed
}

// pauseAtShutdown pauses b as pause() does, marked as paused by the
// shutdown; a pause or resume of b in progress finishes first.
func (f *Front) pauseAtShutdown(ctx context.Context, b *box) error {
	b.life.Lock()
	defer b.life.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("not started: %w", err)
	}
	return f.pauseLocked(ctx, b, time.Now())
}

// shutdownPauseEnded is what the timeout of a sandbox paused at a
// shutdown does in the next daemon, as it would have done to the sandbox
// running: kill it, or (on_timeout pause) leave it paused as a pause asked
// for, which an envd call no longer resumes unless auto_resume says so.
func (f *Front) shutdownPauseEnded(b *box) {
	b.life.Lock()
	defer b.life.Unlock()
	b.mu.Lock()
	still := b.paused != "" && !b.shutdownAt.IsZero() && !time.Now().Before(b.end)
	b.mu.Unlock()
	if !still || b.isClosed() {
		return
	}
	if !b.cycle.AutoPause {
		f.log.Info("e2b sandbox paused at the last shutdown reached its timeout", "sandbox", b.id)
		f.close(b.id)
		return
	}
	b.mu.Lock()
	b.shutdownAt = time.Time{}
	snap, instance := b.paused, b.instance
	b.mu.Unlock()
	if err := f.savePaused(b, snap, instance, time.Time{}); err != nil {
		f.log.Error("recording a sandbox paused at its timeout", "sandbox", b.id, "err", err)
	}
	b.logf("info", nil, "the timeout came while the sandbox was paused by the daemon's shutdown: it stays paused (on_timeout pause)")
}
