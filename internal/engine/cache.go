package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/store"
	"golang.org/x/sys/unix"
)

// Cache is the environment cache: its inventory and the operations that
// move layers. Without a runtime (OpenCache) it cannot build.
type Cache struct {
	c *envcache.Cache
}

// OpenCache opens the cache alone, for inspection and transfer commands.
func OpenCache(cfg CacheConfig, log *slog.Logger) (*Cache, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return openCache(cfg, nil, log)
}

func openCache(cfg CacheConfig, rt *sandbox.Runtime, log *slog.Logger) (*Cache, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("%w: no cache directory given", ErrBadRequest)
	}
	if cfg.MustExist {
		if _, err := os.Stat(filepath.Join(cfg.Dir, "store")); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w at %s (build one with msb cache build, or name another with --cache)", ErrNoCache, cfg.Dir)
		}
	}
	var budget *store.Budget
	if cfg.IOBudget > 0 {
		budget = store.NewBudget(cfg.IOBudget)
	}
	c, err := envcache.Open(envcache.Options{Dir: cfg.Dir, Runtime: rt, Budget: budget, Logger: log, Pythons: cfg.Pythons, PythonSearch: cfg.PythonSearch, Toolchains: cfg.Toolchains,
		Wheelhouse: cfg.Wheelhouse, SystemSitePackages: cfg.SystemSitePackages, RepoSources: cfg.RepoSources,
		RetryFailed: cfg.RetryFailed, CopyMode: cfg.CopyMode, Base: cfg.Base, ReposDir: cfg.ReposDir,
		DownloadCache: cfg.DownloadCache, BuildNetwork: cfg.BuildNetwork, IndexURL: cfg.IndexURL})
	if err != nil {
		return nil, err
	}
	return &Cache{c: c}, nil
}

// Dir is the cache directory.
func (c *Cache) Dir() string { return c.c.Dir() }

func (c *Cache) st() *store.Store { return c.c.Store() }

// Listing lists layers, newest use first, and recorded build failures.
func (c *Cache) Listing(ctx context.Context) (api.CacheListing, error) {
	u, err := c.st().Usage(ctx)
	if err != nil {
		return api.CacheListing{}, err
	}
	out := api.CacheListing{Dir: c.Dir(), Layers: []api.CacheLayer{}, Failures: []api.BuildFailure{}}
	for _, l := range u.Layers {
		cl := api.CacheLayer{ID: l.ID.String(), Refs: l.Refs, Parents: ids(l.Parents), Entries: l.Entries, FileBytes: l.LogicalBytes,
			DiskBytes: l.DiskBytes, UniqueBytes: l.UniqueBytes, LastUse: l.LastUse.UTC().Format(time.RFC3339)}
		if len(l.Refs) > 0 {
			cl.Kind, _, _ = strings.Cut(l.Refs[0], "/")
		}
		out.Layers = append(out.Layers, cl)
	}
	fails, err := c.c.Failures()
	if err != nil {
		return out, err
	}
	for _, f := range fails {
		out.Failures = append(out.Failures, api.BuildFailure{Kind: f.Kind, Key: f.Key, EnvKey: f.EnvKey, Reason: f.Reason, Log: f.Log, At: f.At.UTC().Format(time.RFC3339)})
	}
	return out, nil
}

// Usage measures the cache's disk use.
func (c *Cache) Usage(ctx context.Context) (api.CacheUsage, error) {
	u, err := c.st().Usage(ctx)
	if err != nil {
		return api.CacheUsage{}, err
	}
	out := api.CacheUsage{Dir: c.Dir(), Layers: len(u.Layers), Objects: u.Objects, Inodes: u.Inodes,
		FileBytes: u.LayerDiskBytes, TreeBytes: u.TreeBytes, DiskBytes: u.DiskBytes, Shifted: u.Shifted, ShiftedBytes: u.ShiftedBytes,
		Compacted: u.Compacted, Compressed: u.Compressed, CompressedBytes: u.CompressedBytes}
	if u.TreeBytes > 0 {
		out.DedupRatio = float64(u.LayerDiskBytes) / float64(u.TreeBytes)
	}
	if c := u.Compression; c.Compressed() {
		out.Compression = fmt.Sprintf("%s (%s %s)", c.Algorithm, c.Filesystem, c.From)
	}
	return out, nil
}

// Verify re-hashes every object and layer. The error is for failures to
// check; what the check found is in the report.
func (c *Cache) Verify(ctx context.Context) (api.VerifyReport, error) {
	r, err := c.st().Verify(ctx)
	if err != nil {
		return api.VerifyReport{}, err
	}
	out := api.VerifyReport{Dir: c.Dir(), Objects: r.Objects, Inodes: r.Inodes, Layers: r.Layers, BytesHashed: r.Bytes,
		Problems: []api.VerifyProblem{}, OK: r.OK()}
	for _, p := range r.Problems {
		vp := api.VerifyProblem{Kind: string(p.Kind), Path: p.Path, Layers: ids(p.Layers), Detail: p.Detail}
		if p.Digest != (store.Digest{}) {
			vp.Digest = p.Digest.String()
		}
		out.Problems = append(out.Problems, vp)
	}
	return out, nil
}

// GC removes what no ref and no running sandbox uses, and the CRIU dumps
// of deleted snapshots (sweepDumps).
func (c *Cache) GC(ctx context.Context) (api.CacheGCReport, error) {
	c.sweepDumps()
	r, err := c.st().GC(ctx)
	if err != nil {
		return api.CacheGCReport{}, err
	}
	return api.CacheGCReport{Layers: ids(r.Layers), Inodes: r.Inodes, Objects: r.Objects, Leases: r.Leases, Temp: r.Temp,
		Shifted: r.Shifted, ShiftedBytes: r.ShiftedBytes, FreedBytes: r.FreedBytes, Kept: r.Kept, DanglingRefs: r.DanglingRef}, nil
}

// Compact makes layers cold: those unused for unusedFor (none by age when
// negative) and those names name (refs or digests), except what a running
// sandbox holds; then it keeps compressed the objects no materialized
// layer links (store.Compact). A cold layer is made again at its next use.
func (c *Cache) Compact(ctx context.Context, unusedFor time.Duration, names []string) (api.CacheCompactReport, error) {
	opts := store.CompactOptions{UnusedFor: unusedFor}
	for _, n := range names {
		id, err := c.resolve(n)
		if err != nil {
			return api.CacheCompactReport{}, err
		}
		opts.Layers = append(opts.Layers, id)
	}
	r, err := c.st().Compact(ctx, opts)
	if err != nil {
		return api.CacheCompactReport{}, err
	}
	return api.CacheCompactReport{Layers: ids(r.Layers), Leased: r.Leased, Objects: r.Objects, RawBytes: r.RawBytes,
		CompressedBytes: r.CompressedBytes, Skipped: r.Skipped, KeptRaw: r.KeptRaw, FreedBytes: r.FreedBytes}, nil
}

// RemoveRefs deletes the refs that patterns name: ref names, or globs of
// path.Match such as repo/astropy/astropy@* (a layer built before its inputs
// changed, e.g. a repository layer made while a submodule's source was
// missing, is made again at its next use). The layers become what GC
// removes unless another ref or a running sandbox uses them. A pattern
// that matches no ref is an error, and then nothing is removed.
func (c *Cache) RemoveRefs(patterns []string) ([]api.LayerRef, error) {
	refs, err := c.st().Refs()
	if err != nil {
		return nil, err
	}
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("ref pattern %q: %w", p, err)
		}
	}
	hits := make([]int, len(patterns))
	var match []api.LayerRef
	for _, r := range refs {
		matched := false
		for i, p := range patterns {
			if ok, _ := path.Match(p, r.Name); ok {
				hits[i]++
				matched = true
			}
		}
		if matched {
			match = append(match, api.LayerRef{Ref: r.Name, Layer: r.Layer.String()})
		}
	}
	for i, n := range hits {
		if n == 0 {
			return nil, fmt.Errorf("%w: no ref matches %q (msb cache ls lists them)", ErrNotFound, patterns[i])
		}
	}
	for i, m := range match {
		if err := c.st().DeleteRef(m.Ref); err != nil {
			return match[:i], err
		}
	}
	return match, nil
}

// resolve turns a ref or a digest into a layer id.
func (c *Cache) resolve(name string) (store.LayerID, error) {
	if id, err := store.ParseLayerID(name); err == nil {
		return id, nil
	}
	id, err := c.st().Ref(name)
	if err != nil {
		return id, fmt.Errorf("%w: layer %q: %w", ErrNotFound, name, err)
	}
	return id, nil
}

// Export writes the named layers (refs or digests; every ref when none)
// with their parents, objects and refs to w as a zstd archive.
func (c *Cache) Export(ctx context.Context, w io.Writer, names []string) (api.TransferReport, error) {
	opts := store.ExportOptions{}
	if len(names) == 0 {
		refs, err := c.st().Refs()
		if err != nil {
			return api.TransferReport{}, err
		}
		for _, r := range refs {
			names = append(names, r.Name)
		}
	}
	var roots []store.LayerID
	for _, n := range names {
		id, err := c.resolve(n)
		if err != nil {
			return api.TransferReport{}, err
		}
		roots = append(roots, id)
		if _, err := store.ParseLayerID(n); err == nil {
			opts.Layers = append(opts.Layers, id)
		} else {
			opts.Refs = append(opts.Refs, n)
		}
	}
	layers, err := c.stacks(roots)
	if err != nil {
		return api.TransferReport{}, err
	}
	if err := c.st().Export(ctx, w, opts); err != nil {
		return api.TransferReport{}, err
	}
	return api.TransferReport{Layers: ids(layers), Refs: opts.Refs}, nil
}

// stacks lists the layers of roots with all their parents, each once.
func (c *Cache) stacks(roots []store.LayerID) ([]store.LayerID, error) {
	seen := map[store.LayerID]bool{}
	var out []store.LayerID
	for _, r := range roots {
		stack, err := c.st().Stack(r)
		if err != nil {
			return nil, err
		}
		for i := len(stack) - 1; i >= 0; i-- {
			if !seen[stack[i]] {
				seen[stack[i]] = true
				out = append(out, stack[i])
			}
		}
	}
	return out, nil
}

// Import reads an archive written by Export.
func (c *Cache) Import(ctx context.Context, r io.Reader) (api.TransferReport, error) {
	rep, err := c.st().Import(ctx, r)
	if err != nil {
		return api.TransferReport{}, err
	}
	return api.TransferReport{Layers: ids(rep.Layers), Refs: rep.Refs, Objects: rep.Objects, Bytes: rep.Bytes}, nil
}

// Pull fetches a layer (a digest, or a ref the server resolves) and its
// parents from another node's Handler, only what is missing here, and
// points ref at it (default: the ref pulled by name).
func (c *Cache) Pull(ctx context.Context, baseURL, name, ref string) (api.TransferReport, error) {
	baseURL = strings.TrimRight(baseURL, "/")
	id, err := store.ParseLayerID(name)
	if err != nil {
		if id, err = remoteRef(ctx, baseURL, name); err != nil {
			return api.TransferReport{}, err
		}
		if ref == "" {
			ref = name
		}
	}
	rep, err := c.st().Pull(ctx, baseURL, id, store.PullOptions{})
	if err != nil {
		return api.TransferReport{}, err
	}
	out := api.TransferReport{URL: baseURL, Layers: ids(rep.Layers), Refs: []string{}, Objects: rep.Objects, Bytes: rep.Bytes}
	if ref != "" {
		if err := c.st().SetRef(ctx, ref, id); err != nil {
			return out, err
		}
		out.Refs = append(out.Refs, ref)
	}
	return out, nil
}

func remoteRef(ctx context.Context, base, name string) (store.LayerID, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/refs/"+name, nil)
	if err != nil {
		return store.LayerID{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return store.LayerID{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256))
	if err != nil {
		return store.LayerID{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return store.LayerID{}, fmt.Errorf("ref %s at %s: %s", name, base, resp.Status)
	}
	return store.ParseLayerID(strings.TrimSpace(string(b)))
}

// Handler serves the cache's layers read-only for Pull on other nodes.
func (c *Cache) Handler() http.Handler { return c.st().Handler() }

// ImportRootfs commits a root filesystem tree as the base layer.
func (c *Cache) ImportRootfs(ctx context.Context, dir string) (api.LayerRef, error) {
	id, err := c.c.ImportRootfs(ctx, dir)
	if err != nil {
		return api.LayerRef{}, err
	}
	return api.LayerRef{Layer: id.String(), Ref: envcache.RootfsRef}, nil
}

// leaseLayers resolves cache layers (refs or digests, bottom first) to
// their trees, parents included, materialized and leased.
func (c *Cache) leaseLayers(ctx context.Context, names []string) ([]string, *store.Lease, error) {
	var roots []store.LayerID
	for _, n := range names {
		id, err := c.resolve(n)
		if err != nil {
			return nil, nil, err
		}
		roots = append(roots, id)
	}
	layers, err := c.stacks(roots)
	if err != nil {
		return nil, nil, err
	}
	paths := make([]string, len(layers))
	for i, id := range layers {
		if paths[i], err = c.st().Materialize(ctx, id); err != nil {
			return nil, nil, err
		}
	}
	lease, err := c.st().Lease(ctx, roots...)
	if err != nil {
		return nil, nil, err
	}
	return paths, lease, nil
}

func ids(l []store.LayerID) api.List[string] {
	out := make([]string, len(l))
	for i, id := range l {
		out[i] = id.String()
	}
	return out
}

// dumpsDir holds the CRIU dumps of Engine.SnapshotProcesses, one dir per
// named snapshot, and those being written (newDump).
func (c *Cache) dumpsDir() string { return filepath.Join(c.Dir(), "dumps") }

// dumpStale is how old a dump being written (.new-*) may grow before
// sweepDumps takes its writer for dead, when no lock of it is held.
const dumpStale = time.Hour

// newDump makes a dir in dumpsDir for a dump being written, locked
// (lockDump, shared) until unlock: sweepDumps leaves it alone while the
// lock is held, and removes it once it is an hour old and unlocked (its
// writer died). The caller removes it or renames it to a snapshot's.
func (c *Cache) newDump() (dir string, unlock func(), err error) {
	if err := os.MkdirAll(c.dumpsDir(), 0o700); err != nil {
		return "", nil, err
	}
	dir, err = os.MkdirTemp(c.dumpsDir(), ".new-")
	if err != nil {
		return "", nil, err
	}
	if unlock, err = lockDump(dir, unix.LOCK_SH); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return dir, unlock, nil
}

// lockDump takes a flock of the dump dir dir (how: unix.LOCK_SH for a
// fork restoring from it or a dump being written, unix.LOCK_EX, with
// LOCK_NB or not, for its removal), held until unlock. A lock is the
// dir's, across processes: a daemon's fork and msb cache gc see each
// other's.
func lockDump(dir string, how int) (unlock func(), err error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(fd, how); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return func() { unix.Close(fd) }, nil
}

// sweepDumps removes the kept dumps whose snapshots are gone and those
// whose writer died (.new-*, dumpStale old), except one a fork still
// restores from or a call still writes (its lock is held). It returns how
// many it removed.
func (c *Cache) sweepDumps() int {
	ents, _ := os.ReadDir(c.dumpsDir())
	n := 0
	for _, en := range ents {
		if strings.HasPrefix(en.Name(), ".new-") {
			if fi, err := en.Info(); err != nil || time.Since(fi.ModTime()) < dumpStale {
				continue
			}
		}
		if c.sweepDump(en.Name()) {
			n++
		}
	}
	return n
}

// sweepDump removes dumpsDir's entry name, a snapshot's dump, when that
// snapshot is gone and no fork restores from it (a .new-* dump when no
// call writes it), and says whether it did. The snapshot is looked up
// under the lock: a snapshot of that name taken again moves its dump
// into place only once it holds the old one's lock (SnapshotProcesses),
// so a dump whose snapshot exists is never removed.
func (c *Cache) sweepDump(name string) bool {
	p := filepath.Join(c.dumpsDir(), name)
	unlock, err := lockDump(p, unix.LOCK_EX|unix.LOCK_NB)
	if err != nil {
		return false // in use, or gone
	}
	defer unlock()
	if !strings.HasPrefix(name, ".new-") {
		if _, err := c.st().Ref(rootfs.SnapshotRef(name)); !errors.Is(err, store.ErrNotFound) {
			return false
		}
	}
	return os.RemoveAll(p) == nil
}
