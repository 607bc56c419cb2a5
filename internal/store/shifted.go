package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A shifted tree (shifted/<key>/tree) is derived data of a stack of
// layers: a copy of the paths of their overlay that a rootless sandbox's
// user owns, owned on disk by the ids that user namespace maps them to (see
// package envcache, shift.go). It is a read-only overlay lower dir above
// the stack, made once and used by every such sandbox, and lives as long as
// all its layers do: GC removes it with the first of them
// (shifted/<key>/layers lists them). Its files belong to the caller's
// subordinate ids but its directories to the caller, who can so remove it.

// shiftedLayersFile lists a shifted tree's layers, one id a line.
const shiftedLayersFile = "layers"

// ShiftedVersion names what a shifted layer holds and how it is laid out
// (envcache's shift.go puts it in every key). Shifted writes it into
// shifted/<key>/version; a shifted layer of another version (session 14's
// and early session 15's have no version file) is used by no sandbox of
// this msb, and GC removes it but while a live lease holds every one of
// its layers (an older msb's sandbox may still mount it).
const ShiftedVersion = "msb-shift-3"

// shiftedVersionFile holds a shifted layer's ShiftedVersion.
const shiftedVersionFile = "version"

// Shifted returns the shifted tree named key, made from layers (bottom
// first), building it with build when it is not there. build fills an
// empty directory of the caller's; the tree is built beside its place and
// renamed into it, so it is either complete or absent, and two builders
// of one key leave one tree. The store's shared lock is held throughout,
// so GC waits for a build.
func (s *Store) Shifted(ctx context.Context, key string, layers []LayerID, build func(ctx context.Context, tree string) error) (string, error) {
	if key == "" || strings.ContainsAny(key, "/.") {
		return "", fmt.Errorf("shifted tree key %q: not a plain name", key)
	}
	unlock, err := s.lock(ctx, false)
	if err != nil {
		return "", err
	}
	defer unlock()
	dir := s.path("shifted", key)
	if _, err := os.Stat(filepath.Join(dir, "tree")); err == nil {
		return filepath.Join(dir, "tree"), nil
	}
	if err := os.MkdirAll(s.path("shifted"), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(s.path("shifted"), ".tmp-"+key[:min(len(key), 12)]+"-")
	if err != nil {
		return "", err
	}
	var list strings.Builder
	for _, id := range layers {
		list.WriteString(id.Hex() + "\n")
	}
	err = os.WriteFile(filepath.Join(tmp, shiftedLayersFile), []byte(list.String()), 0o644)
	if err == nil {
		err = os.WriteFile(filepath.Join(tmp, shiftedVersionFile), []byte(ShiftedVersion+"\n"), 0o644)
	}
	if err == nil {
		err = os.Mkdir(filepath.Join(tmp, "tree"), 0o755)
	}
	if err == nil {
		err = build(ctx, filepath.Join(tmp, "tree"))
	}
	if err == nil {
		err = os.Rename(tmp, dir)
		if errors.Is(err, fs.ErrExist) || errors.Is(err, unix.ENOTEMPTY) {
			err = nil // another builder was first
		} else if err == nil {
			return filepath.Join(dir, "tree"), nil
		}
	}
	if rerr := removeAllWritable(tmp); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		return "", fmt.Errorf("building shifted tree %s: %w", key, err)
	}
	return filepath.Join(dir, "tree"), nil
}

// gcShifted removes the shifted trees whose layers are not all kept,
// those of another ShiftedVersion whose layers are not all leased (live),
// and temp ones (GC holds the store lock exclusively: no build is under
// way).
func (s *Store) gcShifted(keep map[LayerID]bool, live []LayerID, r *GCReport) error {
	leased := make(map[LayerID]bool, len(live))
	for _, id := range live {
		leased[id] = true
	}
	ents, err := os.ReadDir(s.path("shifted"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		dir := s.path("shifted", e.Name())
		if strings.HasPrefix(e.Name(), ".tmp-") {
			r.Temp++
		} else if s.shiftedKept(dir, keep) && (shiftedCurrent(dir) || s.shiftedKept(dir, leased)) {
			continue
		} else {
			r.Shifted++
		}
		n := diskBytes(dir)
		r.FreedBytes += n
		if !strings.HasPrefix(e.Name(), ".tmp-") {
			r.ShiftedBytes += n
		}
		if err := removeAllWritable(dir); err != nil {
			return fmt.Errorf("gc: %w", err)
		}
	}
	return nil
}

// shiftedCurrent: the shifted tree at dir is of this ShiftedVersion.
func shiftedCurrent(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, shiftedVersionFile))
	return err == nil && strings.TrimSpace(string(b)) == ShiftedVersion
}

// shiftedKept: every layer the shifted tree at dir lists is kept.
func (s *Store) shiftedKept(dir string, keep map[LayerID]bool) bool {
	b, err := os.ReadFile(filepath.Join(dir, shiftedLayersFile))
	if err != nil {
		return false
	}
	for _, line := range strings.Fields(string(b)) {
		d, err := parseHexDigest(line)
		if err != nil || !keep[LayerID(d)] {
			return false
		}
	}
	return true
}

// diskBytes is the disk space (st_blocks) of the inodes under dir, each
// once: a shifted layer's inodes are its own, so removing it frees them.
func diskBytes(dir string) int64 {
	var n int64
	seen := map[[2]uint64]bool{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		var st unix.Stat_t
		if err != nil || unix.Lstat(p, &st) != nil || seen[[2]uint64{st.Dev, st.Ino}] {
			return nil
		}
		seen[[2]uint64{st.Dev, st.Ino}] = true
		n += st.Blocks * 512
		return nil
	})
	return n
}
