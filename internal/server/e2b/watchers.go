package e2b

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/server/e2b/envd/filesystem"
)

// watch starts a watcher of a routed request's sandbox on dir and
// registers it with the sandbox, which ends it when it closes or pauses.
func (s *filesystemService) watch(ctx context.Context, dir string, recursive bool) (*box, *watcher, error) {
	b, sb, err := s.f.sandboxOf(ctx)
	if err != nil {
		return nil, nil, connectError(err)
	}
	w, err := openWatcher(sb.InitPid(), abs(dir), recursive)
	if err != nil {
		return nil, nil, connectError(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.watchers) >= maxWatchers {
		w.close(errWatchClosed)
		return nil, nil, connect.NewError(connect.CodeResourceExhausted,
			fmt.Errorf("sandbox %s has %d watchers, the most it may have: remove one first", b.id, maxWatchers))
	}
	if b.watchers == nil {
		b.watchers = map[string]*watcher{}
	}
	b.watchers[w.id] = w
	return b, w, nil
}

// unwatch ends the watcher id of b and forgets it.
func (f *Front) unwatch(b *box, id string) {
	b.mu.Lock()
	w := b.watchers[id]
	delete(b.watchers, id)
	b.mu.Unlock()
	if w == nil {
		return
	}
	w.close(errWatchClosed)
	if n := w.dropCount(); n > 0 {
		f.log.Warn("an e2b watch dropped events its client did not read in time", "sandbox", b.id, "dir", w.dir, "dropped", n)
	}
}

// endWatchers ends every watcher of b (closed or paused). b.mu is held.
func (b *box) endWatchers() {
	for _, w := range b.watchers {
		w.close(errWatchClosed)
	}
	b.watchers = nil
}

// watcherOf is b's watcher id.
func (b *box) watcherOf(id string) (*watcher, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w := b.watchers[id]; w != nil {
		return w, nil
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher %s not found in sandbox %s", id, b.id))
}

// WatchDir streams a directory's events as they come, after a start
// event, with a keepalive every keepAlive, until the client goes, the
// directory is removed (a clean end) or the sandbox closes.
func (s *filesystemService) WatchDir(ctx context.Context, req *connect.Request[filesystem.WatchDirRequest], stream *connect.ServerStream[filesystem.WatchDirResponse]) error {
	b, w, err := s.watch(ctx, req.Msg.GetPath(), req.Msg.GetRecursive())
	if err != nil {
		return err
	}
	defer s.f.unwatch(b, w.id)
	if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Start{Start: &filesystem.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		evs, end, ready := w.take()
		for _, ev := range evs {
			if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Filesystem{Filesystem: ev}}); err != nil {
				return err
			}
		}
		if errors.Is(end, errDirGone) {
			return nil
		}
		if end != nil {
			return connectError(end)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ready:
		case <-tick.C:
			if s.f.running(b.id) == nil { // closed behind the front end's back (reaped): release it
				return connectError(errWatchClosed)
			}
			if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Keepalive{Keepalive: &filesystem.WatchDirResponse_KeepAlive{}}}); err != nil {
				return err
			}
		}
	}
}

// CreateWatcher starts a watcher whose events GetWatcherEvents takes.
func (s *filesystemService) CreateWatcher(ctx context.Context, req *connect.Request[filesystem.CreateWatcherRequest]) (*connect.Response[filesystem.CreateWatcherResponse], error) {
	_, w, err := s.watch(ctx, req.Msg.GetPath(), req.Msg.GetRecursive())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.CreateWatcherResponse{WatcherId: w.id}), nil
}

// GetWatcherEvents takes a watcher's events since the last call; a watch
// that ended answers its events, then (and forgets the watcher) why it
// ended.
func (s *filesystemService) GetWatcherEvents(ctx context.Context, req *connect.Request[filesystem.GetWatcherEventsRequest]) (*connect.Response[filesystem.GetWatcherEventsResponse], error) {
	b, _ := ctx.Value(boxKey{}).(*box)
	if b == nil {
		return nil, connectError(engine.ErrNotFound)
	}
	w, err := b.watcherOf(req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	evs, end, _ := w.take()
	if len(evs) == 0 && end != nil {
		s.f.unwatch(b, w.id)
		if errors.Is(end, errDirGone) {
			end = fmt.Errorf("%w: %w", engine.ErrNotFound, end)
		}
		return nil, connectError(end)
	}
	return connect.NewResponse(&filesystem.GetWatcherEventsResponse{Events: evs}), nil
}

// RemoveWatcher ends a watcher.
func (s *filesystemService) RemoveWatcher(ctx context.Context, req *connect.Request[filesystem.RemoveWatcherRequest]) (*connect.Response[filesystem.RemoveWatcherResponse], error) {
	b, _ := ctx.Value(boxKey{}).(*box)
	if b == nil {
		return nil, connectError(engine.ErrNotFound)
	}
	if _, err := b.watcherOf(req.Msg.GetWatcherId()); err != nil {
		return nil, err
	}
	s.f.unwatch(b, req.Msg.GetWatcherId())
	return connect.NewResponse(&filesystem.RemoveWatcherResponse{}), nil
}
