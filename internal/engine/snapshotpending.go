package engine

import (
	"context"
	"fmt"
	"sync"
)

// A named snapshot answers before it is durable: e.Snapshot returns once
// the sandbox's writable layer is staged (read frozen; hashed after the
// thaw, in memory, which names the layer) and its record staged with the
// sessions' state, and the store's publication (the new content written
// to temp files, the fsyncs of it, the object and manifest names, the
// tree, the ref) goes on beside the caller. Until it ended the name is
// pending: this engine's uses of it (a fork or rollback from it, a
// listing, a delete, another snapshot of that name) wait for it, as does
// Close, so that a daemon that stops keeps it, and so does any reader of
// its ref in this process (store.Store.ReserveRef: a create on the image
// snapshot/<name>, an export); WaitSnapshot waits for one and says
// whether it was published. A crash or kill -9 before the publication
// ended leaves what a crash during any commit leaves: no name, or a name
// whose layers are whole (temp files that gc removes), never a name
// whose content is not durable.

// pendingSnapshots is the named snapshots being published.
type pendingSnapshots struct {
	mu sync.Mutex // guards m
	m  map[string]*pendingSnapshot
}

// pendingSnapshot is one name's publication: done is closed when it
// ended, err its outcome.
type pendingSnapshot struct {
	done chan struct{}
	err  error
}

// reserve takes name for a snapshot being taken; ok is false when one
// of that name is in flight. end ends it with its publication's outcome
// (nil: published); call it once.
func (p *pendingSnapshots) reserve(name string) (end func(error), ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]*pendingSnapshot{}
	}
	if _, taken := p.m[name]; taken {
		return nil, false
	}
	ps := &pendingSnapshot{done: make(chan struct{})}
	p.m[name] = ps
	return func(err error) {
		p.mu.Lock()
		delete(p.m, name)
		p.mu.Unlock()
		ps.err = err
		close(ps.done)
	}, true
}

// reserveSnapshot takes name for a snapshot being taken (named or with
// processes): ErrSnapshotExists when one of that name is in flight, so
// that two takers of a name whose ref is not set yet do not both publish
// it; ErrClosed once Close began, whose waitAll may have looked before
// (a stopping daemon answers nothing it does not keep).
func (e *Engine) reserveSnapshot(name string) (end func(error), err error) {
	end, ok := e.snapPending.reserve(name)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrSnapshotExists, name)
	}
	// Close sets closed before its waitAll looks: a reservation it did
	// not see finds closed set.
	if err := e.open(); err != nil {
		end(nil)
		return nil, err
	}
	return end, nil
}

// wait returns once no snapshot named name is in flight, with the
// outcome of the one that was (nil when none was), or ctx's error.
func (p *pendingSnapshots) wait(ctx context.Context, name string) error {
	p.mu.Lock()
	ps := p.m[name]
	p.mu.Unlock()
	if ps == nil {
		return nil
	}
	select {
	case <-ps.done:
		return ps.err
	case <-ctx.Done():
		return fmt.Errorf("waiting for snapshot %q to be published: %w", name, ctx.Err())
	}
}

// waitAll returns once the publications in flight when it was called
// ended.
func (p *pendingSnapshots) waitAll() {
	p.mu.Lock()
	var all []*pendingSnapshot
	for _, ps := range p.m {
		all = append(all, ps)
	}
	p.mu.Unlock()
	for _, ps := range all {
		<-ps.done
	}
}

// WaitSnapshot returns once the named snapshot is durable (e.Snapshot
// answers before: see pendingSnapshots), with the error of its
// publication if it failed (the name is then absent), or ctx's. A name
// not in flight returns nil at once, whether it exists or not.
func (e *Engine) WaitSnapshot(ctx context.Context, name string) error {
	return e.snapPending.wait(ctx, name)
}
