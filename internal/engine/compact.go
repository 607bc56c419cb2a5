package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/store"
)

// Compaction by the daemon: with Config.CompactUnused set, the engine
// compacts the cache's layers unused for that long (store.Store.Compact:
// trees removed, objects kept zstd-compressed, never a layer a live lease
// holds, so never one a sandbox uses) every Config.CompactEvery, in a
// goroutine of its own whose compression runs on a thread at nice 19
// (CompactOptions.Background). Close cancels a compaction under way and
// waits for it; what it leaves is a store Verify passes (cold.go).

// CompactionStats count the engine's background compactions (zero when
// Config.CompactUnused is 0).
type CompactionStats struct {
	// Runs counts the compactions that ended, Errors those that failed
	// (a shutdown's cancellation is neither: Cancelled).
	Runs, Errors, Cancelled int64
	// Layers, Objects, RawBytes, CompressedBytes and FreedBytes add up
	// the runs' store.CompactReport.
	Layers, Objects                       int64
	RawBytes, CompressedBytes, FreedBytes int64
	// Started counts the compactions begun; Running says one is under
	// way; LastDuration is the last run's, LastLayers the layers it made
	// cold.
	Started      int64
	Running      bool
	LastDuration time.Duration
	LastLayers   []store.LayerID
}

// compactor is the engine's background compaction: its stats, guarded
// by mu, and done, closed when its goroutine has ended.
type compactor struct {
	mu   sync.Mutex
	st   CompactionStats
	done chan struct{}
}

// CompactionStats reports the background compactions so far.
func (e *Engine) CompactionStats() CompactionStats {
	c := &e.compact
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.st
	st.LastLayers = append([]store.LayerID(nil), c.st.LastLayers...)
	return st
}

// compactLoop compacts every Config.compactEvery until the engine closes.
func (e *Engine) compactLoop() {
	defer close(e.compact.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-e.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(e.cfg.compactEvery())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ctx.Err() == nil { // select picks at random when both are ready
				e.compactOnce(ctx)
			}
		}
	}
}

// compactOnce compacts the layers unused for Config.CompactUnused, logs
// what it did and counts it.
func (e *Engine) compactOnce(ctx context.Context) {
	c := &e.compact
	c.mu.Lock()
	c.st.Running = true
	c.st.Started++
	c.mu.Unlock()
	start := time.Now()
	r, err := e.cache.st().Compact(ctx, store.CompactOptions{UnusedFor: e.cfg.CompactUnused, Background: true})
	took := time.Since(start)
	c.mu.Lock()
	c.st.Running = false
	switch {
	case err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
		c.st.Cancelled++
	case err != nil:
		c.st.Runs++
		c.st.Errors++
	default:
		c.st.Runs++
	}
	c.st.LastDuration, c.st.LastLayers = took, r.Layers
	c.st.Layers += int64(len(r.Layers))
	c.st.Objects += int64(r.Objects)
	c.st.RawBytes += r.RawBytes
	c.st.CompressedBytes += r.CompressedBytes
	c.st.FreedBytes += r.FreedBytes
	c.mu.Unlock()
	short := make([]string, len(r.Layers))
	for i, id := range r.Layers {
		short[i] = id.Short()
	}
	attrs := []any{"unused_for", e.cfg.CompactUnused, "layers", short, "leased", r.Leased, "objects", r.Objects,
		"raw_bytes", r.RawBytes, "compressed_bytes", r.CompressedBytes, "kept_raw", r.KeptRaw, "skipped", r.Skipped,
		"freed_bytes", r.FreedBytes, "duration", took}
	switch {
	case err != nil && ctx.Err() != nil:
		e.log.Info("cache compaction stopped by the shutdown", append(attrs, "error", err)...)
	case err != nil:
		e.log.Error("cache compaction failed", append(attrs, "error", err)...)
	case len(r.Layers) > 0 || r.Objects > 0:
		e.log.Info("cache compacted", attrs...)
	default:
		e.log.Debug("cache compaction found nothing to do", attrs...)
	}
}
