package store

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// LayerUsage is one layer's line in `msb cache ls`.
type LayerUsage struct {
	ID      LayerID   `json:"id"`
	Refs    []string  `json:"refs,omitempty"`
	Parents []LayerID `json:"parents,omitempty"`
	Entries int       `json:"entries"`
	// LogicalBytes is the sum of the layer's file sizes.
	LogicalBytes int64 `json:"logical_bytes"`
	// DiskBytes is the disk space (st_blocks) of the layer's inodes, each
	// once: what the layer's files take on disk.
	DiskBytes int64 `json:"disk_bytes"`
	// UniqueBytes is the part of DiskBytes in inodes no other layer uses:
	// what removing this layer alone would free, at least.
	UniqueBytes int64 `json:"unique_bytes"`
	// LastUse is when the layer was last committed, materialized or leased.
	LastUse time.Time `json:"last_use"`
	// Compacted: its tree is removed until its next use (Store.Compact);
	// DiskBytes counts only what of it other layers keep raw.
	Compacted bool `json:"compacted,omitempty"`
}

// Usage is the store's disk use, for `msb cache ls` and `msb cache du`.
type Usage struct {
	Layers []LayerUsage `json:"layers"`
	// LogicalBytes is the sum of all layers' logical sizes: what the layers
	// would take as separate copies.
	LogicalBytes int64 `json:"logical_bytes"`
	// DiskBytes is the disk space of everything under the store root, from
	// st_blocks, each inode counted once however many names it has.
	DiskBytes int64 `json:"disk_bytes"`
	// DedupRatio is LogicalBytes / DiskBytes (0 for an empty store).
	DedupRatio float64 `json:"dedup_ratio"`
	// LayerDiskBytes is the sum of the layers' DiskBytes: what their files
	// would take on disk as separate copies.
	LayerDiskBytes int64 `json:"layer_disk_bytes"`
	// TreeBytes is the disk space of the inodes the layers use, each once:
	// what their files take on disk, shared.
	TreeBytes int64 `json:"tree_bytes"`
	Objects   int   `json:"objects"`
	Inodes    int   `json:"inodes"`
	// Compacted is the number of compacted layers (Store.Compact);
	// Compressed the number of objects held only zstd-compressed, and
	// CompressedBytes their disk space (a part of DiskBytes).
	Compacted       int   `json:"compacted"`
	Compressed      int   `json:"compressed"`
	CompressedBytes int64 `json:"compressed_bytes"`
	// Shifted is the number of shifted layers (see Store.Shifted), and
	// ShiftedBytes their disk space, from st_blocks, each inode once: a
	// part of DiskBytes, in inodes of their own (copies, not names of
	// the layers' files), which the layers' figures do not hold. Where
	// the copies are clones (btrfs, XFS), st_blocks counts blocks they
	// share with the layers' files: the disk holds less.
	Shifted      int   `json:"shifted"`
	ShiftedBytes int64 `json:"shifted_bytes"`
	// Compression is how the filesystem compresses what is written to the
	// store. The byte counts above come from st_blocks, which btrfs gives
	// before compression: with it on, the disk holds less.
	Compression Compression `json:"compression"`
}

// Usage measures the store. It reads every manifest and stats every file.
func (s *Store) Usage(ctx context.Context) (Usage, error) {
	var u Usage
	refs, err := s.Refs()
	if err != nil {
		return u, err
	}
	refsOf := map[LayerID][]string{}
	for _, r := range refs {
		refsOf[r.Layer] = append(refsOf[r.Layer], r.Name)
	}
	ents, err := os.ReadDir(s.path("layers"))
	if err != nil {
		return u, err
	}
	keysOf := map[LayerID]map[inodeKey]bool{}
	useCount := map[inodeKey]int{}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return u, err
		}
		d, err := parseHexDigest(e.Name())
		if err != nil {
			continue
		}
		id := LayerID(d)
		m, err := s.Manifest(id)
		if err != nil {
			return u, err
		}
		lu := LayerUsage{ID: id, Refs: refsOf[id], Parents: m.Parents, Entries: len(m.Entries), Compacted: s.Compacted(id)}
		if lu.Compacted {
			u.Compacted++
		}
		keys := map[inodeKey]bool{}
		for i := range m.Entries {
			if e := &m.Entries[i]; e.Type == TypeFile {
				lu.LogicalBytes += e.Size
				keys[s.keyOf(e)] = true
			}
		}
		for k := range keys {
			useCount[k]++
		}
		keysOf[id] = keys
		if fi, err := os.Stat(filepath.Join(s.layerDir(id), "used")); err == nil {
			lu.LastUse = fi.ModTime()
		}
		u.LogicalBytes += lu.LogicalBytes
		u.Layers = append(u.Layers, lu)
	}
	blocks := map[inodeKey]int64{}
	for k := range useCount {
		var st unix.Stat_t
		if unix.Lstat(s.inodePath(k), &st) == nil {
			blocks[k] = st.Blocks * 512
			u.TreeBytes += st.Blocks * 512
		}
	}
	for i := range u.Layers {
		lu := &u.Layers[i]
		for k := range keysOf[lu.ID] {
			lu.DiskBytes += blocks[k]
			if useCount[k] == 1 {
				lu.UniqueBytes += blocks[k]
			}
		}
		u.LayerDiskBytes += lu.DiskBytes
	}
	sort.Slice(u.Layers, func(i, j int) bool { return u.Layers[i].LastUse.After(u.Layers[j].LastUse) })

	seen := map[[2]uint64]bool{}
	shifted := s.path("shifted") + string(filepath.Separator)
	err = filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // removed while we walk
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			return nil
		}
		if dir := filepath.Dir(p); !d.IsDir() && filepath.Dir(dir) == s.path("objects", "sha256") {
			u.Objects++
		} else if !d.IsDir() && filepath.Dir(dir) == s.path("inodes") {
			u.Inodes++
		} else if !d.IsDir() && filepath.Dir(dir) == s.path("objects", "zstd") {
			u.Compressed++
			u.CompressedBytes += st.Blocks * 512
		}
		rel, inShifted := strings.CutPrefix(p, shifted)
		if inShifted && strings.HasPrefix(rel, ".tmp-") {
			inShifted = false // half-built: GC's to remove
		} else if inShifted && d.IsDir() && !strings.ContainsRune(rel, filepath.Separator) {
			u.Shifted++
		}
		key := [2]uint64{st.Dev, st.Ino}
		if !seen[key] {
			seen[key] = true
			u.DiskBytes += st.Blocks * 512
			if inShifted {
				u.ShiftedBytes += st.Blocks * 512
			}
		}
		return nil
	})
	if err != nil {
		return u, err
	}
	if u.DiskBytes > 0 {
		u.DedupRatio = float64(u.LogicalBytes) / float64(u.DiskBytes)
	}
	// Informative only: a filesystem msb cannot ask (statx without mount
	// ids, before Linux 5.8) is reported as not compressing.
	u.Compression, _ = DirCompression(s.root)
	return u, nil
}
