package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/store"
)

// A named snapshot answers before it is durable: e.Snapshot returns once
// the sandbox's writable layer is staged (read frozen; hashed after the
// thaw, in memory, which names the layer) and its record staged with the
// sessions' state, and the store's publication (the new content written
// to temp files, the fsyncs of it, the object and manifest names, the
// tree, the ref) goes on beside the caller. The name's one record in
// flight is the store's reservation of its ref (store.Store.ReserveRef),
// taken before the snapshot is, marked publishing once it is staged and
// ended with the publication's outcome: until then the name is pending.
// This engine's uses of it (a fork or rollback from it, a listing, a
// delete, another snapshot of that name) wait for it, as does Close, so
// that a daemon that stops keeps it, and so does any reader of its ref
// in this process once it is publishing (a create on the image
// snapshot/<name>, an export, gc); WaitSnapshot waits for one and says
// whether it was published. A crash or kill -9 before the publication
// ended leaves what a crash during any commit leaves: no name, or a name
// whose layers are whole (temp files that gc removes), never a name
// whose content is not durable.

// reserveSnapshot takes name for a snapshot being taken (named or with
// processes): ErrSnapshotExists when one of that name is in flight, so
// that two takers of a name whose ref is not set yet do not both publish
// it; ErrClosed once Close began, whose wait may have looked before (a
// stopping daemon answers nothing it does not keep). end ends it with
// the publication's outcome (nil: published or nothing to publish).
func (e *Engine) reserveSnapshot(name string) (end func(error), err error) {
	r, err := e.reserveSnapshotRef(name)
	if err != nil {
		return nil, err
	}
	return r.End, nil
}

// reserveSnapshotRef is reserveSnapshot's reservation, for a caller that
// marks it publishing (store.Reservation.Publishing).
func (e *Engine) reserveSnapshotRef(name string) (*store.Reservation, error) {
	r, err := e.cache.st().ReserveRef(rootfs.SnapshotRef(name))
	if errors.Is(err, store.ErrReserved) {
		return nil, fmt.Errorf("%w: %q", ErrSnapshotExists, name)
	}
	if err != nil {
		return nil, err
	}
	// Close sets closed before its wait looks: a reservation it did not
	// see finds closed set.
	if err := e.open(); err != nil {
		r.End(nil)
		return nil, err
	}
	return r, nil
}

// waitSnapshots returns once the named snapshots in flight when it was
// called are published or failed.
func (e *Engine) waitSnapshots() { e.cache.st().WaitAllReserved() }

// WaitSnapshot returns once the named snapshot is durable (e.Snapshot
// answers before: see above), with the error of its publication if it
// failed (the name is then absent), or ctx's. A name not in flight
// returns nil at once, whether it exists or not.
func (e *Engine) WaitSnapshot(ctx context.Context, name string) error {
	return e.cache.st().WaitReserved(ctx, rootfs.SnapshotRef(name))
}
