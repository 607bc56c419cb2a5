package store

import "sync"

// A ref may be answered for before its publication ended: a caller that
// staged the layers a ref will name (a named snapshot: docs/engine.md)
// reserves the ref (ReserveRef), answers, and publishes beside its
// caller. Until the reservation is released, this process's Ref, Refs
// and DeleteRef of that ref wait for it, on every Store of the same root,
// so that a use of the name just answered finds it. Nothing of it is on
// disk: another process sees the ref once it is set, as with any commit,
// and a crash leaves what a crash during that commit leaves.

// refsInFlight is, by store root, the refs reserved: each a channel
// closed when its reservation is released.
var refsInFlight = struct {
	mu sync.Mutex
	m  map[string]map[string]chan struct{}
}{m: map[string]map[string]chan struct{}{}}

// ReserveRef marks ref as being published; release ends that (call it
// once the publication ended, set or failed). A ref reserved already is
// waited for first.
func (s *Store) ReserveRef(ref string) (release func()) {
	for {
		refsInFlight.mu.Lock()
		refs := refsInFlight.m[s.root]
		if refs == nil {
			refs = map[string]chan struct{}{}
			refsInFlight.m[s.root] = refs
		}
		prev := refs[ref]
		if prev == nil {
			done := make(chan struct{})
			refs[ref] = done
			refsInFlight.mu.Unlock()
			return sync.OnceFunc(func() {
				refsInFlight.mu.Lock()
				if refs := refsInFlight.m[s.root]; refs[ref] == done {
					delete(refs, ref)
					if len(refs) == 0 {
						delete(refsInFlight.m, s.root)
					}
				}
				refsInFlight.mu.Unlock()
				close(done)
			})
		}
		refsInFlight.mu.Unlock()
		<-prev
	}
}

// waitRef returns once ref is not reserved in this process.
func (s *Store) waitRef(ref string) {
	refsInFlight.mu.Lock()
	done := refsInFlight.m[s.root][ref]
	refsInFlight.mu.Unlock()
	if done != nil {
		<-done
	}
}

// waitRefs returns once none of the refs reserved when it was called is.
func (s *Store) waitRefs() {
	refsInFlight.mu.Lock()
	var all []chan struct{}
	for _, done := range refsInFlight.m[s.root] {
		all = append(all, done)
	}
	refsInFlight.mu.Unlock()
	for _, done := range all {
		<-done
	}
}
