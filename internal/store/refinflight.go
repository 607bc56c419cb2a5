package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// A ref may be answered for before its publication ended: a caller that
// will stage the layers a ref names (a named snapshot: docs/engine.md)
// reserves the ref (ReserveRef) first, which keeps a second taker of
// the name out, stages, marks the reservation publishing, answers, and
// publishes beside its caller; End ends it with the publication's
// outcome. The reservation is the one record of that name in flight in
// this process, on every Store of the same root: WaitReserved waits for
// it whatever its phase and returns its outcome; this store's Ref,
// DeleteRef and Refs (so gc) wait for it once it is publishing, and a
// Ref or DeleteRef that waited for one that failed says why the ref is
// absent. Before it is publishing its taker holds no lock of the store
// yet (it has not staged), so a gc that holds the lock must not wait for
// it. Nothing of it is on disk: another process sees the ref once it is
// set, as with any commit, and a crash leaves what a crash during that
// commit leaves.

// ErrReserved: the ref is reserved by this process already (ReserveRef).
var ErrReserved = errors.New("ref being published")

// Reservation is a ref reserved for its publication (ReserveRef).
type Reservation struct {
	root, ref  string
	publishing bool          // guarded by reserved.mu
	done       chan struct{} // closed by End
	err        error         // the publication's outcome, set before done is closed
	end        sync.Once
}

// reserved is, by store root, the refs reserved.
var reserved = struct {
	mu sync.Mutex
	m  map[string]map[string]*Reservation
}{m: map[string]map[string]*Reservation{}}

// ReserveRef reserves ref for a publication (ErrReserved when it is
// already); end it with End once the publication ended, set or failed.
func (s *Store) ReserveRef(ref string) (*Reservation, error) {
	if err := validRef(ref); err != nil {
		return nil, err
	}
	reserved.mu.Lock()
	defer reserved.mu.Unlock()
	refs := reserved.m[s.root]
	if refs == nil {
		refs = map[string]*Reservation{}
		reserved.m[s.root] = refs
	}
	if refs[ref] != nil {
		return nil, fmt.Errorf("%w: %s", ErrReserved, ref)
	}
	r := &Reservation{root: s.root, ref: ref, done: make(chan struct{})}
	refs[ref] = r
	return r, nil
}

// Publishing marks the reservation's ref as being published: from then
// on the store's readers of it (Ref, DeleteRef, Refs and so gc) wait for
// End. Call it while the publication's stage holds the store's lock, so
// that no gc holding the lock waits for it.
func (r *Reservation) Publishing() {
	reserved.mu.Lock()
	r.publishing = true
	reserved.mu.Unlock()
}

// End ends the reservation with its publication's outcome (nil: the ref
// is set); whoever waited for it gets err. Calls after the first do
// nothing.
func (r *Reservation) End(err error) {
	r.end.Do(func() {
		reserved.mu.Lock()
		if refs := reserved.m[r.root]; refs[r.ref] == r {
			delete(refs, r.ref)
			if len(refs) == 0 {
				delete(reserved.m, r.root)
			}
		}
		reserved.mu.Unlock()
		r.err = err
		close(r.done)
	})
}

// WaitReserved returns once ref is not reserved in this process, with
// the outcome of the reservation it waited for (nil when there was
// none), or ctx's error (a ctx done already asks whether it is reserved).
func (s *Store) WaitReserved(ctx context.Context, ref string) error {
	r := s.reservation(ref, false)
	if r == nil {
		return nil
	}
	select {
	case <-r.done: // ended: its outcome, whatever ctx says
		return r.err
	default:
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("waiting for ref %s to be published: %w", ref, ctx.Err())
	}
}

// WaitAllReserved returns once the reservations of this process made
// before it was called ended.
func (s *Store) WaitAllReserved() {
	for _, r := range s.reservations(false) {
		<-r.done
	}
}

// reservation is ref's reservation, nil when there is none (or, with
// publishing, none that is publishing).
func (s *Store) reservation(ref string, publishing bool) *Reservation {
	reserved.mu.Lock()
	defer reserved.mu.Unlock()
	r := reserved.m[s.root][ref]
	if r == nil || publishing && !r.publishing {
		return nil
	}
	return r
}

// reservations are the reservations of the root (with publishing, those
// publishing).
func (s *Store) reservations(publishing bool) []*Reservation {
	reserved.mu.Lock()
	defer reserved.mu.Unlock()
	var out []*Reservation
	for _, r := range reserved.m[s.root] {
		if r.publishing || !publishing {
			out = append(out, r)
		}
	}
	return out
}

// waitRef returns once ref is not being published in this process, with
// that publication's error (nil when there was none or it succeeded).
func (s *Store) waitRef(ref string) error {
	if r := s.reservation(ref, true); r != nil {
		<-r.done
		return r.err
	}
	return nil
}

// waitRefs returns once none of the publications in flight when it was
// called is.
func (s *Store) waitRefs() {
	for _, r := range s.reservations(true) {
		<-r.done
	}
}
