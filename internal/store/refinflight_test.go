package store

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestReserveRef: a reserved ref's readers in this process (Ref, Refs,
// DeleteRef, on any Store of the root) wait until it is released, then
// see what the publication left: the ref set, or none.
func TestReserveRef(t *testing.T) {
	s := newStore(t)
	other, err := Open(s.Root())
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "src")
	writeTree(t, src, map[string]node{"a": {content: "a"}})
	staged, err := s.StageDir(t.Context(), src, CommitOptions{MapOwner: rootOwner})
	if err != nil {
		t.Fatal(err)
	}
	release := s.ReserveRef("snapshot/x")
	got := make(chan error, 3)
	go func() { _, err := other.Ref("snapshot/x"); got <- err }()
	go func() {
		refs, err := s.Refs()
		if err == nil && (len(refs) != 1 || refs[0].Layer != staged.ID) {
			err = errors.New("Refs missed the reserved ref once set")
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a reader of a reserved ref did not wait: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := s.Publish(t.Context(), "snapshot/x", staged); err != nil {
		t.Fatal(err)
	}
	release()
	for range 2 {
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	}
	// Released without a ref set (a publication that failed): not found.
	release = s.ReserveRef("snapshot/y")
	go func() { _, err := s.Ref("snapshot/y"); got <- err }()
	time.Sleep(10 * time.Millisecond)
	release()
	if err := <-got; !errors.Is(err, ErrNotFound) {
		t.Fatalf("a ref released unset: %v", err)
	}
	// A delete waits for the ref it deletes.
	release = s.ReserveRef("snapshot/x")
	go func() { got <- other.DeleteRef("snapshot/x") }()
	select {
	case err := <-got:
		t.Fatalf("DeleteRef of a reserved ref did not wait: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ref("snapshot/x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after the delete: %v", err)
	}
}
