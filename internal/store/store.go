package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/minisandbox/msb/internal/atomicfile"
)

// FormatVersion is the on-disk format version a new store is written
// with, in <root>/VERSION; Compact makes it 2 (versionLine2).
const FormatVersion = 1

const versionLine = "msb-store 1\n"

// A store is version 2 once Compact made something cold (versionLine2).

// Options tune a Store. The zero value is usable.
type Options struct {
	// Budget bounds the bytes being copied at once by CommitDir,
	// Materialize, Import and Pull. Nil means unbounded. Share one Budget
	// between stores and builders to bound a whole node.
	Budget *Budget
	// Workers is how many files are hashed, copied or linked at once
	// (default GOMAXPROCS).
	Workers int
	// Logger receives warnings such as copy fallbacks (default: discarded).
	Logger *slog.Logger
	// Rootless materializes every entry as owned by the caller and marks
	// opaque directories with user.* xattrs only, as an unprivileged user
	// must. It is forced on when the process is not root, or is root of a
	// user namespace that does not map every uid.
	Rootless bool
}

// Store is a content-addressed store rooted at one directory. Its methods
// are safe for concurrent use by many goroutines and many processes.
//
// Lock order: the store lock (a flock on <root>/lock: shared for writers,
// exclusive for GC) is taken before any lease file lock.
type Store struct {
	root     string
	budget   *Budget
	workers  int
	log      *slog.Logger
	rootless bool
	uid, gid uint32 // the caller's, used for every entry when rootless
	// caps: whether a rootless store can set file capabilities.
	caps capsState

	// parentsMu guards parents, a memo of each layer's parents: layers are
	// immutable, and decoding a venv's manifest to learn them costs
	// milliseconds on every task's start.
	parentsMu sync.Mutex
	parents   map[LayerID][]LayerID

	// heldDrops: layers a Drop kept because another held them (see Drop).
	heldDrops heldDrops

	// cold is set once VERSION says 2 (versionLine2): the store may hold
	// compressed objects. While it is unset each store lock taken reads
	// VERSION again (noteVersion). Compact writes VERSION 2 under the
	// exclusive lock before it compresses anything, and nothing makes a
	// store 1 again, so under the lock an unset cold means that no object
	// is compressed: a store never compacted skips the stat of a
	// compressed path per object (thaw, HasObject).
	cold atomic.Bool

	hooks testHooks
}

// testHooks let tests inject faults; all nil in production.
type testHooks struct {
	// wrapWriter wraps the writer of every temp file holding object content.
	wrapWriter func(io.Writer) io.Writer
	// link replaces os.Link when materializing a tree.
	link func(oldname, newname string) error
	// flush sees each barrier's paths before it flushes them, and
	// whether it syncs the whole filesystem instead.
	flush func(paths []string, whole bool)
	// compact is called at Compact's stages ("start", "tree" after its
	// first tree, "objects" halfway through removing raw names); an
	// error stops it there, as a crash would.
	compact func(stage string) error
}

// Open opens the store at root, creating it if root does not exist or is
// an empty directory.
func Open(root string) (*Store, error) { return OpenOptions(root, Options{}) }

// OpenOptions is Open with options.
func OpenOptions(root string, opts Options) (*Store, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", root, err)
	}
	s := &Store{
		root:     abs,
		budget:   opts.Budget,
		workers:  opts.Workers,
		log:      opts.Logger,
		rootless: opts.Rootless || os.Geteuid() != 0 || !fullIDMap(),
		uid:      uint32(os.Geteuid()),
		gid:      uint32(os.Getegid()),
	}
	if s.workers <= 0 {
		s.workers = runtime.GOMAXPROCS(0)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := s.init(); err != nil {
		return nil, fmt.Errorf("opening store %s: %w", abs, err)
	}
	return s, nil
}

// Root returns the store's directory (absolute).
func (s *Store) Root() string { return s.root }

// Rootless reports whether the store materializes layers as the caller.
func (s *Store) Rootless() bool { return s.rootless }

func (s *Store) init() error {
	b, err := os.ReadFile(s.path("VERSION"))
	switch {
	case err == nil:
		if string(b) != versionLine && string(b) != versionLine2 {
			return fmt.Errorf("%w: VERSION says %q, this msb reads %q", ErrVersion, strings.TrimSpace(string(b)), strings.TrimSpace(versionLine))
		}
		s.cold.Store(string(b) == versionLine2)
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := os.MkdirAll(s.root, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(s.root)
	if err != nil {
		return err
	}
	for _, e := range ents {
		// Another process may be creating the store right now.
		if !isStoreTopLevel(e.Name()) {
			return fmt.Errorf("directory is not empty and has no VERSION file (found %q)", e.Name())
		}
	}
	CompressLogged(s.root, s.log) // before anything is written there
	for _, d := range []string{"tmp", "manifests", "layers", "refs", "leases", "objects/sha256", "inodes"} {
		if err := os.MkdirAll(s.path(d), 0o755); err != nil {
			return err
		}
	}
	for i := range 256 {
		fan := fmt.Sprintf("%02x", i)
		if err := os.MkdirAll(s.path("objects", "sha256", fan), 0o755); err != nil {
			return err
		}
		if err := os.MkdirAll(s.path("inodes", fan), 0o755); err != nil {
			return err
		}
	}
	if err := s.writeFileAtomic(s.path("VERSION"), []byte(versionLine), 0o644); err != nil {
		return err
	}
	return atomicfile.SyncDir(s.root)
}

// fullIDMap reports whether this process's user namespace maps all uids,
// as the initial one does. In a user namespace that maps only a few (a
// rootless sandbox's), uid 0 cannot give files arbitrary owners.
func fullIDMap() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return true // no user namespaces: euid decides
	}
	f := strings.Fields(string(b))
	return len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295"
}

func isStoreTopLevel(name string) bool {
	switch name {
	case "VERSION", "lock", "tmp", "manifests", "layers", "refs", "leases", "objects", "inodes":
		return true
	}
	return false
}

func (s *Store) path(elem ...string) string {
	return filepath.Join(append([]string{s.root}, elem...)...)
}

func (s *Store) objectPath(d Digest) string {
	h := d.Hex()
	return filepath.Join(s.root, "objects", "sha256", h[:2], h)
}

// manifestSuffix names a manifest file: the canonical JSON, zstd-compressed
// (a repository commit's manifest shrinks from ~190 to ~30 bytes an entry).
const manifestSuffix = ".json.zst"

func (s *Store) manifestPath(id LayerID) string {
	return filepath.Join(s.root, "manifests", id.Hex()+manifestSuffix)
}

// manifestCodec compresses and decompresses manifest files; zstd's encoder
// and decoder are safe for concurrent EncodeAll/DecodeAll.
var manifestCodec = struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
}{
	enc: mustEncoder(zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))),
	dec: mustDecoder(zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<30))),
}

func mustEncoder(e *zstd.Encoder, err error) *zstd.Encoder {
	if err != nil {
		panic(err)
	}
	return e
}

func mustDecoder(d *zstd.Decoder, err error) *zstd.Decoder {
	if err != nil {
		panic(err)
	}
	return d
}

func (s *Store) layerDir(id LayerID) string {
	return filepath.Join(s.root, "layers", id.Hex())
}

// TreePath returns the directory holding the materialized layer, for use as
// an overlay lower dir. It does not check that the layer exists.
func (s *Store) TreePath(id LayerID) string {
	return filepath.Join(s.layerDir(id), "tree")
}

// lock takes the store lock, shared or exclusive, waiting until ctx is done.
// The returned function releases it.
func (s *Store) lock(ctx context.Context, exclusive bool) (func(), error) {
	f, err := os.OpenFile(s.path("lock"), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening store lock: %w", err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	if err := flockWait(ctx, int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("taking store lock (exclusive=%v): %w", exclusive, err)
	}
	s.noteVersion()
	return func() { f.Close() }, nil
}

// noteVersion sets cold when VERSION says 2 (see Store.cold), or cannot be
// read: that costs only the stats cold saves.
func (s *Store) noteVersion() {
	if s.cold.Load() {
		return
	}
	if b, err := os.ReadFile(s.path("VERSION")); err != nil || string(b) != versionLine {
		s.cold.Store(true)
	}
}

// flockWait takes a flock, polling so that ctx can cancel the wait.
func flockWait(ctx context.Context, fd, how int) error {
	delay := time.Millisecond
	for {
		err := unix.Flock(fd, how|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// writeFileAtomic replaces path with data (atomicfile), through a temp
// file in the store's tmp/, where gc finds what a killed write left.
func (s *Store) writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	opts := atomicfile.Options{Perm: perm, TempDir: s.path("tmp"), TempPattern: "file-*"}
	return atomicfile.Write(path, data, opts)
}

// writeTempFile writes data to a new temp file of the store, not synced,
// and returns its path.
func (s *Store) writeTempFile(data []byte, perm os.FileMode) (string, error) {
	f, err := os.CreateTemp(s.path("tmp"), "file-*")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// syncFS flushes the whole filesystem holding the store: one syncfs(2)
// instead of an fsync per file when a batch of files is published.
func (s *Store) syncFS() error {
	f, err := os.Open(s.root)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", s.root, err)
	}
	return nil
}

// touchUsed records that a layer was used now (its "used" file's mtime).
func (s *Store) touchUsed(id LayerID) {
	p := filepath.Join(s.layerDir(id), "used")
	now := time.Now()
	if err := os.Chtimes(p, now, now); err == nil {
		return
	}
	if f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
		f.Close()
	}
}

// Has reports whether the layer is in the store: materialized, or
// compacted (Compacted), when its next Materialize or Lease makes its tree
// again. Its tree (TreePath) is there only after one of those.
func (s *Store) Has(id LayerID) bool {
	return s.materialized(id) || s.Compacted(id)
}

// Manifest reads and verifies a layer's manifest.
func (s *Store) Manifest(id LayerID) (*Manifest, error) {
	b, err := s.manifestBytes(id)
	if err != nil {
		return nil, err
	}
	m, err := DecodeManifest(b)
	if err != nil {
		return nil, fmt.Errorf("manifest of layer %s: %w", id, err)
	}
	return m, nil
}

func (s *Store) manifestBytes(id LayerID) ([]byte, error) {
	z, err := os.ReadFile(s.manifestPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("manifest of layer %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading manifest of layer %s: %w", id, err)
	}
	b, err := manifestCodec.dec.DecodeAll(z, nil)
	if err != nil {
		return nil, fmt.Errorf("decompressing manifest of layer %s: %w", id, ErrDigestMismatch)
	}
	if got := DigestOf(b); got != Digest(id) {
		return nil, fmt.Errorf("manifest of layer %s hashes to %s: %w", id, got, ErrDigestMismatch)
	}
	return b, nil
}

// putManifest stores a manifest's canonical bytes under their digest.
func (s *Store) putManifest(b []byte) (LayerID, error) {
	id := LayerID(DigestOf(b))
	if _, err := os.Lstat(s.manifestPath(id)); err == nil {
		return id, nil
	}
	if err := s.writeFileAtomic(s.manifestPath(id), manifestCodec.enc.EncodeAll(b, nil), 0o444); err != nil {
		return id, fmt.Errorf("writing manifest of layer %s: %w", id, err)
	}
	return id, nil
}

// Stack returns the overlay lower-dir order for a layer: the layer, then its
// parents' stacks depth first, each layer once (first occurrence kept).
func (s *Store) Stack(id LayerID) ([]LayerID, error) {
	var out []LayerID
	seen := map[LayerID]bool{}
	var visit func(LayerID, int) error
	visit = func(id LayerID, depth int) error {
		if seen[id] {
			return nil
		}
		if depth > 128 {
			return fmt.Errorf("%w: layer parents nest deeper than 128", ErrBadManifest)
		}
		seen[id] = true
		out = append(out, id)
		parents, err := s.layerParents(id)
		if err != nil {
			return err
		}
		for _, p := range parents {
			if err := visit(p, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := visit(id, 0); err != nil {
		return nil, err
	}
	return out, nil
}

// layerParents returns a layer's parents, from the memo when it can.
func (s *Store) layerParents(id LayerID) ([]LayerID, error) {
	s.parentsMu.Lock()
	p, ok := s.parents[id]
	s.parentsMu.Unlock()
	if ok {
		return p, nil
	}
	m, err := s.Manifest(id)
	if err != nil {
		return nil, err
	}
	s.parentsMu.Lock()
	if s.parents == nil {
		s.parents = map[LayerID][]LayerID{}
	}
	s.parents[id] = m.Parents
	s.parentsMu.Unlock()
	return m.Parents, nil
}

// TreeLayer is the layer whose tree (TreePath) path is, if it is one.
func (s *Store) TreeLayer(path string) (LayerID, bool) {
	dir, base := filepath.Split(filepath.Clean(path))
	if base != "tree" {
		return LayerID{}, false
	}
	d, err := parseHexDigest(filepath.Base(dir))
	if err != nil || s.TreePath(LayerID(d)) != filepath.Clean(path) {
		return LayerID{}, false
	}
	return LayerID(d), true
}
