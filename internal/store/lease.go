package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Lease keeps layers (and their parents) from being collected while a
// sandbox uses them. It is a file in <root>/leases held under an exclusive
// flock for the lease's life: when the holder exits, even by a crash, the
// kernel drops the lock and the next GC removes the lease.
type Lease struct {
	// ID names the lease file.
	ID string
	// Layers are the leased layers with all their parents.
	Layers []LayerID

	s    *Store
	f    *os.File
	path string
}

type leaseFile struct {
	PID     int       `json:"pid"`
	Created time.Time `json:"created"`
	Layers  []LayerID `json:"layers"`
}

// Lease takes a lease on layers, which must be in the store (Has), and on
// all their parents; it materializes those that are compacted. It records the time as each layer's last use. Call Release
// when done.
func (s *Store) Lease(ctx context.Context, layers ...LayerID) (*Lease, error) {
	unlock, err := s.lock(ctx, false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	seen := map[LayerID]bool{}
	var all []LayerID
	for _, id := range layers {
		stack, err := s.Stack(id)
		if err != nil {
			return nil, fmt.Errorf("leasing layer %s: %w", id, err)
		}
		for _, l := range stack {
			if !seen[l] {
				seen[l] = true
				all = append(all, l)
			}
		}
	}
	for _, id := range all {
		if s.materialized(id) {
			continue
		}
		if !s.Compacted(id) {
			return nil, fmt.Errorf("leasing layer %s: not materialized: %w", id, ErrNotFound)
		}
		// Thawed under the lock this lease is taken under: Compact, which
		// takes it exclusively, cannot make it cold again before the
		// lease holds it.
		m, err := s.Manifest(id)
		if err != nil {
			return nil, fmt.Errorf("leasing layer %s: %w", id, err)
		}
		if _, err := s.materialize(ctx, id, m); err != nil {
			return nil, fmt.Errorf("leasing layer %s: %w", id, err)
		}
	}
	var rnd [12]byte
	rand.Read(rnd[:])
	l := &Lease{ID: hex.EncodeToString(rnd[:]), Layers: all, s: s}
	l.path = s.path("leases", l.ID+".lease")
	body, err := json.Marshal(leaseFile{PID: os.Getpid(), Created: time.Now().UTC(), Layers: all})
	if err != nil {
		return nil, err
	}
	// Lock the file before it becomes visible in leases/, so that GC never
	// sees it unlocked; a flock follows the inode through the rename.
	tmp := s.path("tmp", "lease-"+l.ID)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating lease: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("locking lease: %w", err)
	}
	if _, err := f.Write(body); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("writing lease: %w", err)
	}
	if err := os.Rename(tmp, l.path); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("publishing lease: %w", err)
	}
	l.f = f
	for _, id := range all {
		s.touchUsed(id)
	}
	return l, nil
}

// Release ends the lease. It is safe to call more than once.
func (l *Lease) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := os.Remove(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	l.f.Close()
	l.f = nil
	return err
}

// liveLeases returns the layers of leases whose holder still holds the
// lock, and removes the lease files of holders that are gone. The caller
// holds the exclusive store lock, so no lease is being created.
func (s *Store) liveLeases() (live []LayerID, removed int, err error) {
	ents, err := os.ReadDir(s.path("leases"))
	if err != nil {
		return nil, 0, err
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".lease") {
			continue
		}
		p := filepath.Join(s.path("leases"), e.Name())
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, removed, err
		}
		lockErr := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if lockErr == nil {
			// Nobody holds it: the holder is gone.
			os.Remove(p)
			f.Close()
			removed++
			continue
		}
		var lf leaseFile
		dec := json.NewDecoder(f)
		derr := dec.Decode(&lf)
		f.Close()
		if !errors.Is(lockErr, unix.EWOULDBLOCK) {
			return nil, removed, fmt.Errorf("checking lease %s: %w", p, lockErr)
		}
		if derr != nil {
			return nil, removed, fmt.Errorf("reading live lease %s: %w", p, derr)
		}
		live = append(live, lf.Layers...)
	}
	return live, removed, nil
}
