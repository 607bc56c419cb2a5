package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestReserveRef: a reserved ref keeps a second taker out; before it is
// publishing nothing of the store waits for it (a gc holding the lock
// runs), WaitReserved does; once publishing, its readers in this process
// (Ref, Refs, DeleteRef, on any Store of the root) wait until it ended,
// then see what the publication left.
func TestReserveRef(t *testing.T) {
	s := newStore(t)
	other, err := Open(s.Root())
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "src")
	writeTree(t, src, map[string]node{"a": {content: "a"}})
	r, err := s.ReserveRef("snapshot/x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.ReserveRef("snapshot/x"); !errors.Is(err, ErrReserved) {
		t.Fatalf("a second reservation of a reserved ref: %v, want ErrReserved", err)
	}
	// Taken, not publishing: the store's readers and gc go on.
	if _, err := other.Ref("snapshot/x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Ref of a ref reserved, not publishing: %v", err)
	}
	if _, err := s.GC(t.Context()); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	err = other.WaitReserved(wctx, "snapshot/x")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitReserved of a reserved ref: %v, want it to wait", err)
	}
	staged, err := s.StageDir(t.Context(), src, CommitOptions{MapOwner: rootOwner})
	if err != nil {
		t.Fatal(err)
	}
	r.Publishing()
	got := make(chan error, 3)
	go func() { _, err := other.Ref("snapshot/x"); got <- err }()
	go func() {
		refs, err := s.Refs()
		if err == nil && (len(refs) != 1 || refs[0].Layer != staged.ID) {
			err = errors.New("Refs missed the reserved ref once set")
		}
		got <- err
	}()
	go func() { got <- other.WaitReserved(t.Context(), "snapshot/x") }()
	select {
	case err := <-got:
		t.Fatalf("a reader of a ref being published did not wait: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := s.Publish(t.Context(), "snapshot/x", staged); err != nil {
		t.Fatal(err)
	}
	r.End(nil)
	for range 3 {
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	}
	// A delete waits for the ref it deletes.
	if r, err = s.ReserveRef("snapshot/x"); err != nil {
		t.Fatalf("reserving a ref whose reservation ended: %v", err)
	}
	r.Publishing()
	go func() { got <- other.DeleteRef("snapshot/x") }()
	select {
	case err := <-got:
		t.Fatalf("DeleteRef of a ref being published did not wait: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	r.End(nil)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ref("snapshot/x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after the delete: %v", err)
	}
}

// TestReserveRefFailed: a publication that failed leaves no ref, and
// each reader that waited for it gets its error: WaitReserved as it is,
// Ref and DeleteRef as the ErrNotFound's cause. A reader after it finds
// the ref absent, plainly.
func TestReserveRefFailed(t *testing.T) {
	s := newStore(t)
	r, err := s.ReserveRef("snapshot/y")
	if err != nil {
		t.Fatal(err)
	}
	r.Publishing()
	boom := errors.New("disk full")
	got := make(chan error, 4)
	go func() { _, err := s.Ref("snapshot/y"); got <- err }()
	go func() { got <- s.DeleteRef("snapshot/y") }()
	for range 2 {
		go func() { got <- s.WaitReserved(t.Context(), "snapshot/y") }()
	}
	time.Sleep(20 * time.Millisecond)
	r.End(boom)
	r.End(nil) // a second End does nothing
	notFound := 0
	for range 4 {
		err := <-got
		if !errors.Is(err, boom) {
			t.Errorf("a waiter of a failed publication: %v, want its error", err)
		}
		if errors.Is(err, ErrNotFound) {
			notFound++
		}
	}
	if notFound != 2 {
		t.Errorf("%d of Ref and DeleteRef said not found, want 2", notFound)
	}
	if _, err := s.Ref("snapshot/y"); !errors.Is(err, ErrNotFound) || errors.Is(err, boom) {
		t.Errorf("Ref after the failed publication ended: %v, want plain ErrNotFound", err)
	}
	if err := s.WaitReserved(t.Context(), "snapshot/y"); err != nil {
		t.Errorf("WaitReserved after it ended: %v", err)
	}
}
