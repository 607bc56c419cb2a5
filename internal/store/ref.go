package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/minisandbox/msb/internal/atomicfile"
)

// maxRefLen keeps an escaped ref within a file name.
const maxRefLen = 200

// validRef checks a ref name: segments of [A-Za-z0-9._@+=:,~-] separated by
// "/", none empty, "." or "..". Examples: env/<key>, repo/<name>@<commit>.
func validRef(name string) error {
	if name == "" || len(name) > maxRefLen {
		return fmt.Errorf("%w: %q: empty or longer than %d bytes", ErrBadRef, name, maxRefLen)
	}
	for seg := range strings.SplitSeq(name, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: %q: empty, \".\" or \"..\" segment", ErrBadRef, name)
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._@+=:,~-", c) >= 0) {
				return fmt.Errorf("%w: %q: character %q not allowed", ErrBadRef, name, c)
			}
		}
	}
	return nil
}

// refs live in one flat directory: "/" is stored as "%2F" ("%" is not
// allowed in names), so "env" and "env/x" can both exist.
func refFile(name string) string         { return strings.ReplaceAll(name, "/", "%2F") }
func refName(file string) string         { return strings.ReplaceAll(file, "%2F", "/") }
func (s *Store) refPath(n string) string { return s.path("refs", refFile(n)) }

// SetRef points a ref at a layer, atomically replacing what it pointed at.
// The layer must be in the store.
func (s *Store) SetRef(ctx context.Context, name string, id LayerID) error {
	if err := validRef(name); err != nil {
		return err
	}
	unlock, err := s.lock(ctx, false)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := s.manifestBytes(id); err != nil {
		return fmt.Errorf("setting ref %s: %w", name, err)
	}
	return s.setRef(name, id)
}

func (s *Store) setRef(name string, id LayerID) error {
	if err := s.writeFileAtomic(s.refPath(name), []byte(id.String()+"\n"), 0o644); err != nil {
		return fmt.Errorf("setting ref %s: %w", name, err)
	}
	return nil
}

// Ref returns the layer a ref points at; a ref this process is
// publishing (ReserveRef) is waited for, and when that publication failed
// the ErrNotFound says why.
func (s *Store) Ref(name string) (LayerID, error) {
	if err := validRef(name); err != nil {
		return LayerID{}, err
	}
	failed := s.waitRef(name)
	b, err := os.ReadFile(s.refPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return LayerID{}, notFound(name, failed)
	}
	if err != nil {
		return LayerID{}, fmt.Errorf("reading ref %s: %w", name, err)
	}
	id, err := ParseLayerID(strings.TrimSuffix(string(b), "\n"))
	if err != nil {
		return id, fmt.Errorf("ref %s: %w", name, err)
	}
	return id, nil
}

// DeleteRef removes a ref; what it pointed at becomes collectable. A ref
// this process is publishing (ReserveRef) is waited for, as by Ref.
func (s *Store) DeleteRef(name string) error {
	if err := validRef(name); err != nil {
		return err
	}
	failed := s.waitRef(name)
	err := os.Remove(s.refPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return notFound(name, failed)
	}
	if err != nil {
		return fmt.Errorf("deleting ref %s: %w", name, err)
	}
	return atomicfile.SyncDir(s.path("refs"))
}

// notFound is the ErrNotFound of an absent ref; failed, when not nil, is
// the error of its publication that a reader waited for.
func notFound(name string, failed error) error {
	if failed != nil {
		return fmt.Errorf("ref %s: %w: its publication failed: %w", name, ErrNotFound, failed)
	}
	return fmt.Errorf("ref %s: %w", name, ErrNotFound)
}

// RefEntry is one named ref.
type RefEntry struct {
	Name  string  `json:"name"`
	Layer LayerID `json:"layer"`
}

// Refs lists all refs sorted by name. Names with a prefix can be selected by
// the caller; unreadable ref files are reported as errors. The refs this
// process is publishing (ReserveRef) are waited for.
func (s *Store) Refs() ([]RefEntry, error) {
	s.waitRefs()
	ents, err := os.ReadDir(s.path("refs"))
	if err != nil {
		return nil, err
	}
	var out []RefEntry
	for _, e := range ents {
		name := refName(e.Name())
		if validRef(name) != nil {
			continue // not a ref (e.g. a stray editor file)
		}
		id, err := s.Ref(name)
		if errors.Is(err, ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, RefEntry{Name: name, Layer: id})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
