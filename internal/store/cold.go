package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// Cold layers. On a filesystem that does not compress (ext4, XFS), a
// layer nobody used for a while can give back most of its disk: Compact
// removes its materialized tree (a "compacted" layer keeps its manifest,
// its layers/<hex>/ directory and a compacted marker there), and then
// every object no materialized layer links any more is kept only
// zstd-compressed, in objects/zstd/ab/<hex>.zst, its raw object and
// inodes removed. The layer's next use (Materialize, Lease, a commit
// over it) decompresses what its tree needs, checks each object against
// its digest, and builds the tree again: once, as for a layer never
// materialized. Compact never touches a layer a live lease holds, nor an
// object a materialized layer links, so a running sandbox's lower dirs
// and the files under them stay as they are.

// compactedFile marks a layer whose tree Compact removed.
const compactedFile = "compacted"

// versionLine2 is the VERSION of a store that holds compacted layers or
// compressed objects: an msb that knows only version 1 would take a
// compacted layer for a missing one and find its objects gone, so it is
// refused instead (ErrVersion). Compact writes it before it removes
// anything; this msb opens both.
const versionLine2 = "msb-store 2\n"

func (s *Store) compressedPath(d Digest) string {
	h := d.Hex()
	return filepath.Join(s.root, "objects", "zstd", h[:2], h+".zst")
}

// materialized reports whether the layer's tree is present.
func (s *Store) materialized(id LayerID) bool {
	_, err := os.Lstat(s.TreePath(id))
	return err == nil
}

// Compacted reports whether the layer is present but cold: its tree
// removed by Compact, made again at its next use.
func (s *Store) Compacted(id LayerID) bool {
	if s.materialized(id) {
		return false
	}
	_, err := os.Lstat(filepath.Join(s.layerDir(id), compactedFile))
	return err == nil
}

// hasCompressed reports whether the store holds the object compressed;
// false without a stat on a store never compacted (see Store.cold).
func (s *Store) hasCompressed(d Digest) bool {
	if !s.cold.Load() {
		return false
	}
	_, err := os.Lstat(s.compressedPath(d))
	return err == nil
}

// coldCodec: zstd at its default level compresses a store's source text,
// bytecode and shared objects about 3x and decompresses at several
// hundred MiB/s per core. Encoders are pooled (each holds its window).
var coldEncoders = sync.Pool{New: func() any {
	return mustEncoder(zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1)))
}}

var coldDecoders = sync.Pool{New: func() any {
	return mustDecoder(zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30)))
}}

// openCompressed opens a compressed object's content; the reader checks
// nothing (its caller hashes what it reads).
func (s *Store) openCompressed(d Digest) (io.ReadCloser, error) {
	f, err := os.Open(s.compressedPath(d))
	if err != nil {
		return nil, err
	}
	dec := coldDecoders.Get().(*zstd.Decoder)
	if err := dec.Reset(f); err != nil {
		f.Close()
		coldDecoders.Put(dec)
		return nil, err
	}
	return &coldReader{dec: dec, f: f}, nil
}

type coldReader struct {
	dec *zstd.Decoder
	f   *os.File
}

func (r *coldReader) Read(b []byte) (int, error) {
	n, err := r.dec.Read(b)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("decompressing %s: %w", r.f.Name(), err)
	}
	return n, err
}

func (r *coldReader) Close() error {
	r.dec.Reset(nil)
	coldDecoders.Put(r.dec)
	return r.f.Close()
}

// decompressedTemp returns an unlinked temp file holding the compressed
// object's content, checked against its digest, for readers that want an
// *os.File (OpenObject: export, the HTTP handler).
func (s *Store) decompressedTemp(ctx context.Context, d Digest) (*os.File, error) {
	r, err := s.openCompressed(d)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := os.CreateTemp(s.path("tmp"), "obj-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	h := sha256.New()
	if _, err := copyHashing(ctx, f, h, r); err != nil {
		f.Close()
		return nil, fmt.Errorf("object %s: %w", d, err)
	}
	if got := Digest(h.Sum(nil)); got != d {
		f.Close()
		return nil, fmt.Errorf("compressed object %s decompresses to %s: %w", d, got, ErrDigestMismatch)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// thaw makes raw again every object m's files need that the store holds
// only compressed: each decompressed into a temp file with the metadata of
// the first inode that needs it, checked against its digest, made durable
// (one barrier for all), linked as its inode and object, and only then is
// its compressed copy removed. The caller holds the store lock (shared).
// It returns how many objects it thawed: none, without a stat, on a store
// never compacted (see Store.cold).
func (s *Store) thaw(ctx context.Context, m *Manifest) (int, error) {
	if !s.cold.Load() {
		return 0, nil
	}
	seen := map[Digest]bool{}
	var keys []inodeKey
	for i := range m.Entries {
		e := &m.Entries[i]
		if e.Type != TypeFile || seen[e.Digest] {
			continue
		}
		seen[e.Digest] = true
		if s.HasRawObject(e.Digest) || !s.hasCompressed(e.Digest) {
			continue
		}
		k := s.keyOf(e)
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return 0, nil
	}
	batch := make([]pendingObject, len(keys))
	var thawed atomic.Int64
	err := parallel(ctx, s.workers, len(keys), func(ctx context.Context, i int) error {
		k := keys[i]
		// An inode with extended attributes is always a copy of a plain
		// object (ensureInode makes it after); others are their object.
		key := &k
		if k.xhash != "" {
			key = nil
		}
		r, err := s.openCompressed(k.digest)
		if errors.Is(err, fs.ErrNotExist) && s.HasRawObject(k.digest) {
			return nil // another process thawed it meanwhile
		}
		if err != nil {
			return fmt.Errorf("thawing object %s: %w", k.digest, err)
		}
		p, err := s.writeTemp(ctx, r, -1, k.digest, key, false)
		r.Close()
		if err != nil {
			return fmt.Errorf("thawing: %w", err)
		}
		batch[i] = p
		thawed.Add(1)
		return nil
	})
	var pending []pendingObject
	for _, p := range batch {
		if p.tmp != "" {
			pending = append(pending, p)
		}
	}
	if err != nil {
		discard(pending)
		return 0, err
	}
	names := s.newBarrier()
	if err := s.publishInto(pending, s.newBarrier(), names); err != nil {
		return 0, fmt.Errorf("thawing: %w", err)
	}
	if err := names.flush(); err != nil {
		return 0, fmt.Errorf("thawing: %w", err)
	}
	for _, p := range pending {
		os.Remove(s.compressedPath(p.digest))
	}
	return int(thawed.Load()), nil
}

// thawOne makes one compressed object raw again, durably, as thaw does,
// for a caller that needs it outside a layer's thaw (ensureInode).
func (s *Store) thawOne(ctx context.Context, d Digest) error {
	r, err := s.openCompressed(d)
	if errors.Is(err, fs.ErrNotExist) && s.HasRawObject(d) {
		return nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("object %s: %w", d, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("thawing object %s: %w", d, err)
	}
	p, err := s.writeTemp(ctx, r, -1, d, nil, true)
	r.Close()
	if err != nil {
		return fmt.Errorf("thawing: %w", err)
	}
	names := s.newBarrier()
	if err := s.publishInto([]pendingObject{p}, s.newBarrier(), names); err != nil {
		return fmt.Errorf("thawing: %w", err)
	}
	if err := names.flush(); err != nil {
		return err
	}
	os.Remove(s.compressedPath(d))
	return nil
}

// CompactOptions choose the layers Compact makes cold.
type CompactOptions struct {
	// UnusedFor compacts every layer not used (materialized, leased or
	// committed) for at least this long; 0 compacts every layer no live
	// lease holds, and a negative value none by age.
	UnusedFor time.Duration
	// Layers are compacted whatever their last use (unless leased).
	Layers []LayerID
	// Background compresses on one thread of its own at the lowest CPU
	// and I/O priorities (nice 19, best-effort 7), as a daemon's
	// compaction does, instead of the store's workers; the short
	// exclusive steps stay at the caller's priority, so that a niced
	// thread never holds what creates wait for.
	Background bool
}

// CompactReport says what Compact did.
type CompactReport struct {
	// Layers are the layers whose trees it removed.
	Layers []LayerID `json:"layers"`
	// Leased counts the layers it left because a live lease holds them.
	Leased int `json:"leased"`
	// Objects counts the objects it compressed, RawBytes their disk
	// space before (st_blocks, each inode once) and CompressedBytes
	// after; Skipped those left raw: linked from outside the store's
	// names, or unreadable to a rootless store's owner (mode 0000).
	Objects         int   `json:"objects"`
	RawBytes        int64 `json:"raw_bytes"`
	CompressedBytes int64 `json:"compressed_bytes"`
	Skipped         int   `json:"skipped"`
	// KeptRaw counts the objects left raw because compressed they would
	// take as many whole blocks (most files of a block or two: on ext4 a
	// file takes whole 4 KiB blocks).
	KeptRaw int `json:"kept_raw"`
	// FreedBytes is the disk space freed, trees included (st_blocks).
	FreedBytes int64 `json:"freed_bytes"`
}

// Compact makes layers cold (see the comment at the top of cold.go): it
// removes the trees of the layers opts choose, except those a live lease
// holds, then compresses every object no materialized layer links. It
// takes the store lock exclusively only for short steps, so that creates
// (which take it shared) wait milliseconds, not the whole compaction:
// choosing the layers and marking them cold; then, once the objects are
// compressed and their compressed copies named durably under the shared
// lock (an object both raw and compressed is read raw), per batch of
// compactBatch objects, checking that nothing links them now and
// removing their raw names. A layer used between the steps (thawed, its
// tree linking the raw objects again) keeps its objects raw. A crash or a
// cancelled ctx at any point leaves a store that opens and whose layers
// are all usable: a tree is removed only after its compacted marker is
// durable, and an object's raw names only after its compressed copy is.
func (s *Store) Compact(ctx context.Context, opts CompactOptions) (CompactReport, error) {
	var r CompactReport
	trash, err := s.compactTrees(ctx, opts, &r)
	if err != nil {
		return r, err
	}
	done, err := s.compressCold(ctx, opts, trash, &r)
	if err != nil {
		return r, err
	}
	for len(done) > 0 {
		n := min(len(done), compactBatch)
		if err := s.removeRaw(ctx, done[:n], &r); err != nil {
			return r, err
		}
		done = done[n:]
	}
	if err := s.syncFS(); err != nil {
		return r, err
	}
	return r, nil
}

// compactBatch is how many objects' raw names one exclusive step of
// Compact removes: a few milliseconds of unlinks, no sync.
const compactBatch = 256

// randomSuffix names a tree Compact renames away: two compactions at
// once (a daemon's, a command's) never pick the same name.
func randomSuffix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// packed is an object Compact compressed to a temp file (synced).
type packed struct {
	d   Digest
	tmp string
	zst int64 // its whole blocks
}

// compactTrees is Compact's first exclusive step: it chooses the layers,
// marks them cold durably and renames their trees (and the garbage under
// layers/) away, returning what to remove once the lock is shared.
func (s *Store) compactTrees(ctx context.Context, opts CompactOptions, r *CompactReport) (trash []string, err error) {
	unlock, err := s.lock(ctx, true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	live, _, err := s.liveLeases()
	if err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	leased := map[LayerID]bool{}
	for _, id := range live {
		leased[id] = true
	}
	named := map[LayerID]bool{}
	for _, id := range opts.Layers {
		if _, err := s.manifestBytes(id); err != nil {
			return nil, fmt.Errorf("compact: %w", err)
		}
		named[id] = true
	}
	ents, err := os.ReadDir(s.path("layers"))
	if err != nil {
		return nil, err
	}
	away := func(p, name string) error {
		gone := filepath.Join(s.path("layers"), ".tmp-"+name+"-compact-"+randomSuffix())
		if err := os.Rename(p, gone); err != nil {
			return err
		}
		trash = append(trash, gone)
		return nil
	}
	now := time.Now()
	var victims []LayerID
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			// Garbage under the exclusive lock (as GC says); its links
			// would keep objects from compressing. Removed below, once
			// the lock is shared.
			if err := away(s.path("layers", e.Name()), "garbage"); err != nil {
				return nil, fmt.Errorf("compact: %w", err)
			}
			continue
		}
		d, err := parseHexDigest(e.Name())
		if err != nil || !s.materialized(LayerID(d)) {
			continue
		}
		id := LayerID(d)
		old := opts.UnusedFor >= 0 && now.Sub(s.lastUse(id)) >= opts.UnusedFor
		if !named[id] && !old {
			continue
		}
		if leased[id] {
			r.Leased++
			continue
		}
		victims = append(victims, id)
	}
	sort.Slice(victims, func(i, j int) bool { return victims[i].String() < victims[j].String() })
	if err := s.hook("start"); err != nil {
		return trash, err
	}
	if len(victims) > 0 {
		if err := s.markVersion2(); err != nil {
			return trash, fmt.Errorf("compact: %w", err)
		}
	}
	// Trees: each marked compacted first (durably), then renamed away.
	b := s.newBarrier()
	for _, id := range victims {
		p := filepath.Join(s.layerDir(id), compactedFile)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return trash, fmt.Errorf("compact: marking layer %s: %w", id.Short(), err)
		}
		f.Close()
		b.add(p, s.layerDir(id))
	}
	if err := b.flush(); err != nil {
		return trash, fmt.Errorf("compact: %w", err)
	}
	for i, id := range victims {
		if i == 1 {
			if err := s.hook("tree"); err != nil {
				return trash, err
			}
		}
		if err := away(s.TreePath(id), id.Short()); err != nil {
			return trash, fmt.Errorf("compact: layer %s: %w", id.Short(), err)
		}
		r.Layers = append(r.Layers, id)
	}
	// Early trees kept in a cold layer's dir (placeEarlyTree) link its
	// objects as its tree did, and would keep them raw: what mounted one
	// held a lease on the layer, and none does now.
	for _, e := range ents {
		d, err := parseHexDigest(e.Name())
		if err != nil || leased[LayerID(d)] || !s.Compacted(LayerID(d)) {
			continue
		}
		id := LayerID(d)
		early, err := filepath.Glob(filepath.Join(s.layerDir(id), earlyPrefix+"*"))
		if err != nil {
			return trash, err
		}
		for _, p := range early {
			if err := away(p, id.Short()+"-"+filepath.Base(p)); err != nil {
				return trash, fmt.Errorf("compact: early tree of layer %s: %w", id.Short(), err)
			}
		}
	}
	return trash, nil
}

// compressCold is Compact's middle, under the shared lock: it removes
// the trash compactTrees renamed away, then compresses every object some
// manifest names, no materialized or leased layer uses and nothing
// outside the store's names links, to synced temp files.
func (s *Store) compressCold(ctx context.Context, opts CompactOptions, trash []string, r *CompactReport) ([]packed, error) {
	unlock, err := s.lock(ctx, false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if opts.Background {
		// The trees' removal too: it is I/O like the compression.
		if err := lowPriority(func() error { return s.removeTrash(trash, r) }); err != nil {
			return nil, err
		}
	} else if err := s.removeTrash(trash, r); err != nil {
		return nil, err
	}
	live, _, err := s.liveLeases()
	if err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	leased := map[LayerID]bool{}
	for _, id := range live {
		leased[id] = true
	}
	hot := map[Digest]bool{}
	cold := map[Digest]bool{}
	manEnts, err := os.ReadDir(s.path("manifests"))
	if err != nil {
		return nil, err
	}
	for _, e := range manEnts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		h, ok := strings.CutSuffix(e.Name(), manifestSuffix)
		d, err := parseHexDigest(h)
		if !ok || err != nil {
			continue
		}
		id := LayerID(d)
		m, err := s.Manifest(id)
		if err != nil {
			return nil, fmt.Errorf("compact: %w", err)
		}
		into := cold
		if s.materialized(id) || leased[id] {
			into = hot
		}
		for i := range m.Entries {
			if e := &m.Entries[i]; e.Type == TypeFile {
				into[e.Digest] = true
			}
		}
	}
	var digests []Digest
	for d := range cold {
		if !hot[d] && s.HasRawObject(d) {
			digests = append(digests, d)
		}
	}
	sort.Slice(digests, func(i, j int) bool { return digests[i].String() < digests[j].String() })
	if err := os.MkdirAll(s.path("objects", "zstd"), 0o755); err != nil {
		return nil, err
	}
	out := make([]packed, len(digests))
	var mu sync.Mutex
	var sfs unix.Statfs_t
	if err := unix.Statfs(s.root, &sfs); err != nil {
		return nil, err
	}
	bsize := max(int64(sfs.Bsize), 512)
	one := func(ctx context.Context, i int) error {
		d := digests[i]
		names, raw, ok, err := s.unlinkedNames(d)
		if err != nil {
			return err
		}
		if !ok {
			mu.Lock()
			r.Skipped++
			mu.Unlock()
			return nil
		}
		if raw <= bsize {
			// One block or none: no compressed copy takes less.
			mu.Lock()
			r.KeptRaw++
			mu.Unlock()
			return nil
		}
		// A rootless store's file whose mode denies its owner reading
		// cannot be opened: another name may be an object of mode 0444;
		// with none, the object stays raw.
		var tmp string
		var zst int64
		for _, n := range names {
			if tmp, zst, err = s.compressObject(ctx, d, n); !errors.Is(err, fs.ErrPermission) {
				break
			}
		}
		if errors.Is(err, fs.ErrPermission) {
			mu.Lock()
			r.Skipped++
			mu.Unlock()
			return nil
		}
		if err != nil {
			return err
		}
		// Whole blocks: a compressed copy that would take as many as the
		// raw content (most files under a block or two) frees nothing, and
		// only costs its layer's thaw.
		zst = (zst + bsize - 1) / bsize * bsize
		if zst >= raw {
			os.Remove(tmp)
			mu.Lock()
			r.KeptRaw++
			mu.Unlock()
			return nil
		}
		out[i] = packed{d: d, tmp: tmp, zst: zst}
		return nil
	}
	if opts.Background {
		err = lowPriority(func() error {
			for i := range digests {
				if err := ctx.Err(); err != nil {
					return err
				}
				if err := one(ctx, i); err != nil {
					return err
				}
			}
			return nil
		})
	} else {
		err = parallel(ctx, s.workers, len(digests), one)
	}
	var done []packed
	for _, p := range out {
		if p.tmp != "" {
			done = append(done, p)
		}
	}
	if err == nil && len(done) > 0 {
		err = s.markVersion2()
	}
	if err == nil {
		err = s.nameCompressed(done)
	}
	for _, p := range done {
		os.Remove(p.tmp)
	}
	if err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	return done, nil
}

// nameCompressed makes the temp files durable, links each as its
// object's compressed copy and makes the names durable: an object both
// raw and compressed is read raw, so this needs only the shared lock.
func (s *Store) nameCompressed(done []packed) error {
	b := s.newBarrier()
	for _, p := range done {
		b.add(p.tmp)
	}
	if err := b.flush(); err != nil {
		return err
	}
	for _, p := range done {
		dst := s.compressedPath(p.d)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := linkIfAbsent(p.tmp, dst); err != nil {
			return err
		}
		b.add(filepath.Dir(dst))
	}
	return b.flush()
}

// removeTrash removes the trees compactTrees renamed away, counting the
// disk they held.
func (s *Store) removeTrash(trash []string, r *CompactReport) error {
	for _, p := range trash {
		r.FreedBytes += treeBlocks(p)
		if err := s.removeTree(p); err != nil {
			return fmt.Errorf("compact: %w", err)
		}
	}
	return nil
}

// lowPriority runs fn on the process's low-priority thread (nice 19, the
// lowest best-effort I/O priority) and waits for it; calls at once take
// turns.
func lowPriority(fn func() error) error {
	errc := make(chan error, 1)
	lowThread() <- func() { errc <- fn() }
	return <-errc
}

// lowThread starts, once, the goroutine that runs lowPriority's funcs
// on a thread locked to it at low priority. It never ends: an unprivileged
// process cannot raise the thread's priority again to give it back, and a
// thread's end SIGKILLs the children it spawned with Pdeathsig (a sandbox
// init spawned on it before it was locked).
var lowThread = sync.OnceValue(func() chan<- func() {
	work := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		tid := unix.Gettid()
		unix.Setpriority(unix.PRIO_PROCESS, tid, 19)
		const ioprioWhoProcess, ioprioClassBE = 1, 2
		unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, uintptr(tid), ioprioClassBE<<13|7)
		for fn := range work {
			fn()
		}
	}()
	return work
})

// removeRaw is one of Compact's exclusive steps: it removes the raw
// names of each object of batch whose compressed copy is named and which
// nothing but the store's names links now. An object a layer thawed since
// compressCold links (its tree holds the raw inode) stays raw, its
// compressed copy removed.
func (s *Store) removeRaw(ctx context.Context, batch []packed, r *CompactReport) error {
	// The raw names are renamed into a directory of tmp/ (garbage to GC)
	// under the lock and unlinked after it: the last unlink of a large
	// file frees its blocks, milliseconds each under load.
	trash, err := os.MkdirTemp(s.path("tmp"), "compact-*")
	if err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	defer os.RemoveAll(trash)
	unlock, err := s.lock(ctx, true)
	if err != nil {
		return err
	}
	defer unlock()
	for i, p := range batch {
		if i == len(batch)/2 {
			if err := s.hook("objects"); err != nil {
				return err
			}
		}
		if !s.hasCompressed(p.d) {
			r.Skipped++ // removed as a duplicate by a GC between the steps
			continue
		}
		names, raw, ok, err := s.unlinkedNames(p.d)
		if err != nil {
			return fmt.Errorf("compact: %w", err)
		}
		if !s.HasRawObject(p.d) {
			continue // another compaction's
		}
		if !ok {
			os.Remove(s.compressedPath(p.d))
			r.Skipped++
			continue
		}
		// Inodes first: an object without inodes is a state commits make
		// too, inodes without their object are not.
		for j := len(names) - 1; j >= 0; j-- {
			err := os.Rename(names[j], filepath.Join(trash, fmt.Sprintf("%d-%d", i, j)))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("compact: %w", err)
			}
		}
		r.Objects++
		r.RawBytes += raw
		r.CompressedBytes += p.zst
		r.FreedBytes += raw - p.zst
	}
	return nil // unlock, then remove the trash (deferred in that order)
}

// hook runs the compact test hook at a stage; nil in production.
func (s *Store) hook(stage string) error {
	if s.hooks.compact != nil {
		return s.hooks.compact(stage)
	}
	return nil
}

// lastUse is the layer's last use: its used file's mtime, else its tree's.
func (s *Store) lastUse(id LayerID) time.Time {
	if fi, err := os.Stat(filepath.Join(s.layerDir(id), "used")); err == nil {
		return fi.ModTime()
	}
	if fi, err := os.Stat(s.TreePath(id)); err == nil {
		return fi.ModTime()
	}
	return time.Time{}
}

// unlinkedNames returns the store's names of an object's content (the
// object first, then its inodes) and their disk space, and whether
// nothing else links them: every inode's link count is its names here.
// A name linked from elsewhere (a tree the store does not know of) keeps
// the object raw.
func (s *Store) unlinkedNames(d Digest) (names []string, blocks int64, ok bool, err error) {
	h := d.Hex()
	inodes, err := filepath.Glob(filepath.Join(s.root, "inodes", h[:2], h+"-*"))
	if err != nil {
		return nil, 0, false, err
	}
	count := map[[2]uint64]uint64{}
	links := map[[2]uint64]uint64{}
	for _, p := range append([]string{s.objectPath(d)}, inodes...) {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return nil, 0, false, err
		}
		k := [2]uint64{st.Dev, st.Ino}
		if count[k] == 0 {
			blocks += st.Blocks * 512
		}
		count[k]++
		links[k] = uint64(st.Nlink)
		names = append(names, p)
	}
	for k, n := range count {
		if links[k] != n {
			return nil, 0, false, nil
		}
	}
	return names, blocks, len(names) > 0, nil
}

// compressObject writes the zstd-compressed content of src, checked
// against d, to a temp file of the store, and returns it and its size. A source that does not hash to d is an error: Compact never
// makes a damaged object's only copy a compressed one.
func (s *Store) compressObject(ctx context.Context, d Digest, src string) (string, int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", 0, err
	}
	defer in.Close()
	f, err := os.CreateTemp(s.path("tmp"), "obj-*.zst")
	if err != nil {
		return "", 0, err
	}
	fail := func(err error) (string, int64, error) {
		f.Close()
		os.Remove(f.Name())
		return "", 0, fmt.Errorf("compressing object %s: %w", d, err)
	}
	enc := coldEncoders.Get().(*zstd.Encoder)
	defer coldEncoders.Put(enc)
	enc.Reset(f)
	h := sha256.New()
	if _, err := copyHashing(ctx, enc, h, in); err != nil {
		return fail(err)
	}
	if err := enc.Close(); err != nil {
		return fail(err)
	}
	if got := Digest(h.Sum(nil)); got != d {
		return fail(fmt.Errorf("%w: %s hashes to %s", ErrDigestMismatch, src, got))
	}
	if err := f.Chmod(0o444); err != nil {
		return fail(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	return f.Name(), st.Size, nil
}

// treeBlocks is the disk space of a tree's directories, symlinks and
// files linked nowhere else (st_blocks).
func treeBlocks(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		var st unix.Stat_t
		if err == nil && unix.Lstat(p, &st) == nil && (d.IsDir() || st.Nlink <= 1) {
			n += st.Blocks * 512
		}
		return nil
	})
	return n
}

// markVersion2 writes VERSION 2 (see versionLine2), durably, once.
func (s *Store) markVersion2() error {
	s.cold.Store(true)
	b, err := os.ReadFile(s.path("VERSION"))
	if err == nil && string(b) == versionLine2 {
		return nil
	}
	if err := s.writeFileAtomic(s.path("VERSION"), []byte(versionLine2), 0o644); err != nil {
		return err
	}
	return fsyncPath(s.root)
}

// hashCompressed decompresses a compressed object and returns the digest
// and size of its content.
func (s *Store) hashCompressed(ctx context.Context, d Digest) (Digest, int64, error) {
	r, err := s.openCompressed(d)
	if err != nil {
		return Digest{}, 0, err
	}
	defer r.Close()
	h := sha256.New()
	n, err := copyHashing(ctx, nopWriter{}, h, r)
	if err != nil {
		return Digest{}, n, err
	}
	return Digest(h.Sum(nil)), n, nil
}
