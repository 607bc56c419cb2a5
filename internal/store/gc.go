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

// GCReport says what GC removed.
type GCReport struct {
	Layers       []LayerID // layers removed (manifest and tree)
	Inodes       int       // inode pool entries removed
	Objects      int       // objects removed
	Leases       int       // lease files of holders that were gone
	Temp         int       // temp files and half-built trees removed
	Shifted      int       // shifted layers removed (see Store.Shifted)
	ShiftedBytes int64     // the part of FreedBytes the shifted layers held
	FreedBytes   int64     // disk blocks freed, from st_blocks
	Kept         int       // layers kept
	DanglingRef  []string  // refs whose layer is missing (kept; fix or delete them)
}

// GC removes every layer that no ref and no live lease reaches (through
// parents too), then every inode and object no remaining layer uses, stale
// leases, and temp files. It holds the store lock exclusively, so commits,
// imports and new leases wait for it and it waits for them.
func (s *Store) GC(ctx context.Context) (GCReport, error) {
	var r GCReport
	unlock, err := s.lock(ctx, true)
	if err != nil {
		return r, err
	}
	defer unlock()

	live, removed, err := s.liveLeases()
	if err != nil {
		return r, fmt.Errorf("gc: %w", err)
	}
	r.Leases = removed
	refs, err := s.Refs()
	if err != nil {
		return r, fmt.Errorf("gc: listing refs: %w", err)
	}
	roots := live
	for _, ref := range refs {
		if _, err := s.manifestBytes(ref.Layer); err != nil {
			r.DanglingRef = append(r.DanglingRef, ref.Name)
			continue
		}
		roots = append(roots, ref.Layer)
	}

	// Mark: the layers reachable from roots and what their files use.
	keepLayers := map[LayerID]bool{}
	keepObjects := map[Digest]bool{}
	keepInodes := map[string]bool{}
	for _, root := range roots {
		if keepLayers[root] {
			continue
		}
		stack, err := s.Stack(root)
		if err != nil {
			return r, fmt.Errorf("gc: layer %s: %w", root, err)
		}
		for _, id := range stack {
			if keepLayers[id] {
				continue
			}
			keepLayers[id] = true
			m, err := s.Manifest(id)
			if err != nil {
				return r, fmt.Errorf("gc: %w", err)
			}
			for i := range m.Entries {
				if e := &m.Entries[i]; e.Type == TypeFile {
					keepObjects[e.Digest] = true
					keepInodes[s.keyOf(e).name()] = true
				}
			}
		}
	}
	r.Kept = len(keepLayers)
	if err := ctx.Err(); err != nil {
		return r, err
	}

	// Sweep, trees first so that the last name of an inode goes last and
	// its blocks are counted once.
	free := func(p string) {
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil && st.Nlink <= 1 {
			r.FreedBytes += st.Blocks * 512
		}
	}
	layerEnts, err := os.ReadDir(s.path("layers"))
	if err != nil {
		return r, err
	}
	for _, e := range layerEnts {
		name := e.Name()
		if strings.HasPrefix(name, ".tmp-") {
			r.Temp++
			s.removeTree(s.path("layers", name))
			continue
		}
		id, err := parseHexDigest(name)
		if err != nil || keepLayers[LayerID(id)] {
			continue
		}
		if err := s.removeTree(s.path("layers", name)); err != nil {
			return r, fmt.Errorf("gc: removing layer %s: %w", name, err)
		}
		r.Layers = append(r.Layers, LayerID(id))
	}
	manEnts, err := os.ReadDir(s.path("manifests"))
	if err != nil {
		return r, err
	}
	for _, e := range manEnts {
		h, ok := strings.CutSuffix(e.Name(), manifestSuffix)
		id, err := parseHexDigest(h)
		if !ok || err != nil || keepLayers[LayerID(id)] {
			continue
		}
		os.Remove(s.path("manifests", e.Name()))
		if !containsLayer(r.Layers, LayerID(id)) {
			r.Layers = append(r.Layers, LayerID(id))
		}
	}
	err = s.sweepFan(ctx, "inodes", func(name string) bool { return keepInodes[name] }, func(p string) {
		free(p)
		if os.Remove(p) == nil {
			r.Inodes++
		}
	})
	if err != nil {
		return r, err
	}
	err = s.sweepFan(ctx, filepath.Join("objects", "sha256"), func(name string) bool {
		d, err := parseHexDigest(name)
		return err != nil || keepObjects[d]
	}, func(p string) {
		free(p)
		if os.Remove(p) == nil {
			r.Objects++
		}
	})
	if err != nil {
		return r, err
	}
	// Compressed objects: those no kept layer names, and those whose raw
	// copy a thaw made before a crash stopped it removing them.
	if _, err := os.Lstat(s.path("objects", "zstd")); err == nil {
		err = s.sweepFan(ctx, filepath.Join("objects", "zstd"), func(name string) bool {
			h, _ := strings.CutSuffix(name, ".zst")
			d, err := parseHexDigest(h)
			return err != nil || keepObjects[d] && !s.HasRawObject(d)
		}, func(p string) {
			free(p)
			if os.Remove(p) == nil {
				r.Objects++
			}
		})
		if err != nil {
			return r, err
		}
	}
	if err := s.gcShifted(keepLayers, live, &r); err != nil {
		return r, err
	}
	tmpEnts, err := os.ReadDir(s.path("tmp"))
	if err != nil {
		return r, err
	}
	for _, e := range tmpEnts {
		p := s.path("tmp", e.Name())
		free(p)
		s.removeTree(p)
		r.Temp++
	}
	if err := s.syncFS(); err != nil {
		return r, err
	}
	return r, nil
}

func containsLayer(ids []LayerID, id LayerID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// sweepFan calls remove for every file under <root>/<dir>/xx/ that keep
// rejects.
func (s *Store) sweepFan(ctx context.Context, dir string, keep func(name string) bool, remove func(path string)) error {
	return s.eachFan(ctx, dir, func(p, name string) error {
		if !keep(name) {
			remove(p)
		}
		return nil
	})
}

// eachFan calls fn for every file under <root>/<dir>/xx/.
func (s *Store) eachFan(ctx context.Context, dir string, fn func(path, name string) error) error {
	fans, err := os.ReadDir(s.path(dir))
	if err != nil {
		return err
	}
	for _, fan := range fans {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !fan.IsDir() {
			continue
		}
		fd := s.path(dir, fan.Name())
		f, err := os.Open(fd)
		if err != nil {
			return err
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for _, n := range names {
			if err := fn(filepath.Join(fd, n), n); err != nil {
				return err
			}
		}
	}
	return nil
}
