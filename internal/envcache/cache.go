package envcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/envlist"
	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/minisandbox/msb/internal/store"
)

// Fixed in-sandbox paths. They are part of every layer, so a cache can move
// without anything in it needing relocation.
const (
	Testbed    = "/testbed"
	VenvPath   = spec.VenvPath
	wheelMount = "/opt/msb/wheelhouse"
	// FormatVersion is mixed into every environment key; bump it when the
	// way environments are built changes.
	FormatVersion = 3
	// RootfsRef names the imported root filesystem layer.
	RootfsRef = "base/rootfs"
)

// Phases reported to a Progress func and keys of Prepared.Timings.
const (
	PhaseMirror   = "mirror"
	PhaseCheckout = "checkout"
	PhaseEnvBuild = "env_build"
	PhaseInstall  = "install"
	PhaseCommit   = "commit"
)

// Errors.
var (
	// ErrEnvBuildFailed: an environment build failed, now or earlier (a
	// marker records it); errors.As gives the *BuildError with the log.
	ErrEnvBuildFailed = errors.New("environment build failed")
	// ErrNoPython: no interpreter of the wanted version was found.
	ErrNoPython = errors.New("python interpreter not found")
	// ErrRepo: the repository or commit could not be fetched.
	ErrRepo = errors.New("repository unavailable")
)

// BuildError describes a failed environment build. It matches
// ErrEnvBuildFailed with errors.Is.
type BuildError struct {
	Kind     string    `json:"kind"` // "env" or "install"
	Key      string    `json:"key"`
	EnvKey   string    `json:"env_key"` // the instance's EnvironmentKey (repo@version)
	Log      string    `json:"log"`     // path of the full build log
	Tail     string    `json:"tail"`    // its last lines
	Reason   string    `json:"reason"`  // one line
	At       time.Time `json:"at"`
	Recorded bool      `json:"-"` // read from a marker of an earlier build
}

func (e *BuildError) Error() string {
	when := ""
	if e.Recorded {
		when = fmt.Sprintf(" (recorded %s; rerun with --retry-failed to try again)", e.At.Format(time.RFC3339))
	}
	if e.Log == "" { // refused before building
		return fmt.Sprintf("%v: %s: %s", ErrEnvBuildFailed, e.EnvKey, e.Reason)
	}
	return fmt.Sprintf("%v: %s [%s %s]: %s%s; log %s\n%s", ErrEnvBuildFailed, e.EnvKey, e.Kind, short(e.Key), e.Reason, when, e.Log, e.Tail)
}

// Is makes errors.Is(err, ErrEnvBuildFailed) true.
func (e *BuildError) Is(target error) bool { return target == ErrEnvBuildFailed }

// Options configure a Cache. Zero values pick the defaults.
type Options struct {
	// Dir is the cache directory (see DefaultDir).
	Dir string
	// Runtime runs build sandboxes; required for environment builds.
	Runtime *sandbox.Runtime
	// Budget bounds bytes in flight across commits and builds (nil: none).
	Budget *store.Budget
	Logger *slog.Logger
	// Pythons maps a version ("3.9") to an interpreter path; versions not
	// listed are searched for (see FindPython).
	Pythons map[string]string
	// PythonSearch is where versions not in Pythons are looked for.
	PythonSearch PythonSearch
	// Toolchains is where the toolchains of non-Python specs are looked
	// for (ToolchainSearchFromEnv).
	Toolchains ToolchainSearch
	// Wheelhouse is a directory of wheels; when set, pip installs offline
	// from it only (--no-index --find-links).
	Wheelhouse string
	// DownloadCache is the directory of downloaded distributions and their
	// index pages, shared by all builds (default <Dir>/downloads).
	DownloadCache string
	// BuildNetwork gives build sandboxes the host's network, with pip's
	// index a proxy that fills the download cache from IndexURL. Off, a
	// build has no network and installs from the download cache alone.
	BuildNetwork bool
	// IndexURL is the upstream index of the build network (default
	// DefaultIndexURL).
	IndexURL string
	// SystemSitePackages creates venvs with --system-site-packages.
	SystemSitePackages bool
	// RepoSources maps "owner/name" to a URL or local path to mirror from.
	RepoSources map[string]string
	// ReposDir holds local repositories to mirror from, named
	// owner__name.git or owner__name (after RepoSources, before GitHub).
	ReposDir string
	// RetryFailed clears a recorded failure once per key and builds again.
	RetryFailed bool
	// CopyMode assembles a private copy of the layers per task instead of
	// returning the layers for an overlay mount (hosts without overlayfs).
	CopyMode bool
	// Base is "" or "host" for the host's system dirs, else a ref or layer
	// digest of an imported root filesystem (e.g. RootfsRef).
	Base string
	// BuildTimeout bounds one environment build (default 1h).
	BuildTimeout time.Duration
	// BuildLimits are the build sandbox's limits (default: sandbox
	// defaults with 16 GiB of memory).
	BuildLimits sandbox.Limits
}

// DefaultDir is the cache directory for a user whose cache directory
// ($XDG_CACHE_HOME, or ~/.cache) is userCacheDir: <userCacheDir>/msb, or
// /tmp/msb-cache-<uid> without one.
func DefaultDir(userCacheDir string) string {
	if userCacheDir == "" {
		return filepath.Join("/tmp", fmt.Sprintf("msb-cache-%d", os.Getuid()))
	}
	return filepath.Join(userCacheDir, "msb")
}

// Cache builds and hands out layers. Safe for concurrent use.
type Cache struct {
	dir   string
	opts  Options
	store *store.Store
	log   *slog.Logger

	envBuilds, installBuilds, repoBuilds, failedBuilds atomic.Int64

	mu      sync.Mutex // guards retried, pythons, toolchainsFound, dpkg and facts
	retried map[string]bool
	pythons map[string]*Python
	// toolchainsFound: each toolchain found on the host, by name.
	toolchainsFound map[string]*Toolchain
	dpkg            map[string]map[string]bool // base key -> installed Debian packages
	facts           map[string]commitFacts     // repo@commit -> its record as last read or written
}

// Stats counts what this Cache built since it was opened.
type Stats struct {
	EnvBuilds     int64 `json:"env_builds"`
	InstallBuilds int64 `json:"install_builds"`
	RepoBuilds    int64 `json:"repo_builds"`
	FailedBuilds  int64 `json:"failed_builds"`
}

// Stats returns the build counters.
func (c *Cache) Stats() Stats {
	return Stats{EnvBuilds: c.envBuilds.Load(), InstallBuilds: c.installBuilds.Load(), RepoBuilds: c.repoBuilds.Load(), FailedBuilds: c.failedBuilds.Load()}
}

// Open opens (creating) the cache at opts.Dir.
func Open(opts Options) (*Cache, error) {
	if opts.Dir == "" {
		opts.Dir = DefaultDir("")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.BuildTimeout == 0 {
		opts.BuildTimeout = time.Hour
	}
	if opts.BuildLimits.MemoryBytes == 0 {
		opts.BuildLimits.MemoryBytes = 16 << 30
	}
	if opts.DownloadCache == "" {
		opts.DownloadCache = filepath.Join(dir, "downloads")
	}
	if opts.DownloadCache, err = filepath.Abs(opts.DownloadCache); err != nil {
		return nil, err
	}
	if opts.IndexURL == "" {
		opts.IndexURL = DefaultIndexURL
	}
	if err := compressNew(dir, opts.Logger); err != nil {
		return nil, err
	}
	for _, d := range []string{"mirrors", "locks", "logs", "failed", "build", "tasks", opts.DownloadCache} {
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("creating cache dir: %w", err)
		}
	}
	st, err := store.OpenOptions(filepath.Join(dir, "store"), store.Options{Budget: opts.Budget, Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("opening store in %s: %w", dir, err)
	}
	if opts.Runtime != nil {
		opts.Runtime.SetShifter(Shifter(st))
	}
	return &Cache{dir: dir, opts: opts, store: st, log: opts.Logger, retried: map[string]bool{}, pythons: map[string]*Python{}, toolchainsFound: map[string]*Toolchain{}, dpkg: map[string]map[string]bool{}, facts: map[string]commitFacts{}}, nil
}

// compressNew asks btrfs to compress a new cache (store.CompressDir):
// builds write under the cache dir and their files are cloned into the
// store, so the whole dir is marked, before anything is written there. A
// cache that has a store already is left as it is.
func compressNew(dir string, log *slog.Logger) error {
	if _, err := os.Stat(filepath.Join(dir, "store", "VERSION")); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating cache dir: %w", err)
	}
	store.CompressLogged(dir, log)
	return nil
}

// Store is the cache's content-addressed store.
func (c *Cache) Store() *store.Store { return c.store }

// Dir is the cache directory (absolute).
func (c *Cache) Dir() string { return c.dir }

func (c *Cache) path(elem ...string) string {
	return filepath.Join(append([]string{c.dir}, elem...)...)
}

// Event is one step of Prepare, for progress displays.
type Event struct {
	Instance string
	Phase    string // PhaseMirror, PhaseCheckout, PhaseEnvBuild, PhaseInstall, PhaseCommit
	Done     bool   // false when the phase starts
	Elapsed  time.Duration
	Err      error
}

// Progress receives events; it must be safe for concurrent calls.
type Progress func(Event)

// Prepared is what a task needs to create its sandbox:
//
//	rt.Create(ctx, sandbox.Spec{Layers: p.Layers, HostBase: p.HostBase, Binds: p.Binds, Env: p.Env, Workdir: p.Workdir})
//
// Release it after the sandbox is closed.
type Prepared struct {
	// Layers are materialized trees, bottom first (sandbox.Spec.Layers);
	// in copy mode one private directory.
	Layers   []string
	HostBase bool
	// Binds make an interpreter outside the host dirs visible, read-only.
	// The download cache is bound read-only too.
	Binds []sandbox.Bind
	// Env: PATH with the venv first, VIRTUAL_ENV, and pip's index at the
	// download cache (pip works offline).
	Env []string
	// Workdir is the task's repository: Testbed, or for an image
	// instance where the image keeps it.
	Workdir string
	// User runs the sandbox's commands: root, or an image's USER.
	User sandbox.User
	// UserHome is the HOME=... entry of Env that User got from the
	// image's /etc/passwd because the image's Env has none; "" when
	// none was added. A sandbox that runs as root instead drops it.
	UserHome string
	// Owners: see sandbox.Config.Owners (an image's, in a rootless store).
	Owners []sandbox.Owner
	Lease  *store.Lease
	// EnvKey is the environment key; EnvLayer and RepoLayer the layers.
	EnvKey    string
	EnvLayer  string
	RepoLayer string
	// RepoStack is the repository's layers, bottom first: RepoLayer alone
	// when it is whole, else the anchor it is a delta over, then RepoLayer.
	RepoStack []string
	// InstallKey and InstallLayer: the instance's install layer (what its
	// install steps wrote, above the repository); empty when the spec has
	// no install steps.
	InstallKey   string
	InstallLayer string
	// Timings of the phases that ran (mirror, checkout, env_build,
	// install, commit, and copy in copy mode).
	Timings map[string]time.Duration
	// Reused: nothing was built for this call.
	Reused bool

	taskDir string
}

// Release ends the lease and removes a copy-mode tree. Call it after the
// sandbox is closed; it is safe to call more than once.
func (p *Prepared) Release() error {
	var err error
	if p.Lease != nil {
		err = p.Lease.Release()
	}
	if p.taskDir != "" {
		err = errors.Join(err, removeAll(p.taskDir))
		p.taskDir = ""
	}
	return err
}

// SandboxConfig is the sandbox.Spec for a task of p (no network, default limits).
func (p *Prepared) SandboxConfig() sandbox.Config {
	if p.taskDir != "" { // copy mode: the private tree is the root itself
		return sandbox.Config{RootDir: p.taskDir, HostBase: p.HostBase, Binds: p.Binds, Env: p.Env, Workdir: p.Workdir, User: p.User, Owners: p.Owners}
	}
	return sandbox.Config{Layers: p.Layers, HostBase: p.HostBase, Binds: p.Binds, Env: p.Env, Workdir: p.Workdir, User: p.User, Owners: p.Owners}
}

// run records a phase's timing and reports it.
type run struct {
	inst     string
	progress Progress
	mu       sync.Mutex
	timings  map[string]time.Duration
	built    bool
}

func (r *run) phase(name string, f func() error) error {
	if r.progress != nil {
		r.progress(Event{Instance: r.inst, Phase: name})
	}
	t := time.Now()
	err := f()
	d := time.Since(t)
	r.mu.Lock()
	r.timings[name] += d
	r.mu.Unlock()
	if r.progress != nil {
		r.progress(Event{Instance: r.inst, Phase: name, Done: true, Elapsed: d, Err: err})
	}
	return err
}

// Prepare makes sure the instance's layers exist (building each at most
// once across processes) and leases them. Bottom first: the base, the
// environment, the repository at the base commit, and the instance's
// install layer. An image instance (inst.Image) is its image's layers
// only (image.go).
func (c *Cache) Prepare(ctx context.Context, inst dataset.Instance, sp spec.Spec, progress Progress) (*Prepared, error) {
	if inst.Image != "" {
		return c.prepareImage(ctx, inst, sp.RepoDir)
	}
	if inst.Repo == "" || inst.BaseCommit == "" {
		return nil, fmt.Errorf("instance %s: repo and base_commit are required", inst.InstanceID)
	}
	r := &run{inst: inst.InstanceID, progress: progress, timings: map[string]time.Duration{}}
	base, err := c.instanceBase(ctx, r, inst, sp, true)
	if err != nil {
		return nil, err
	}
	defer base.release() // the Prepared's lease holds its layers after
	repoID, err := c.repoLayer(ctx, r, inst, inst.BaseCommit)
	if err != nil {
		return nil, err
	}
	repoStack, err := c.store.Stack(repoID) // a delta's anchor below it
	if err != nil {
		return nil, err
	}
	env, err := c.envLayer(ctx, r, inst, sp, base)
	if err != nil {
		return nil, err
	}
	scmEnv, err := c.scmEnvFor(ctx, r, inst, sp) // setuptools-scm's version, which the shallow clone cannot give
	if err != nil {
		if installScript(sp) != "" { // the install layer's key has it
			return nil, err
		}
		c.log.Warn("the task's environment lacks setuptools-scm's version", "instance", inst.InstanceID, "err", err)
	}
	installKey, installID, hasInstall, err := c.installLayer(ctx, r, inst, sp, base, env, repoStack, scmEnv)
	if err != nil {
		return nil, err
	}
	repoBottomFirst := reverse(repoStack)
	ids := append(reverse(env.stack), repoBottomFirst...) // bottom first
	if hasInstall {
		ids = append(ids, installID)
	}
	lease, err := c.store.Lease(ctx, ids...)
	if err != nil {
		return nil, fmt.Errorf("leasing layers of %s: %w", inst.InstanceID, err)
	}
	p := &Prepared{
		HostBase: base.host, Binds: append(env.binds(), c.downloadsBind()), Workdir: Testbed, Lease: lease,
		Env:    base.onBase(taskEnv(sp, env, scmEnv)),
		EnvKey: env.key, EnvLayer: env.layer.String(), RepoLayer: repoID.String(), Timings: r.timings, Reused: !r.built,
	}
	for _, id := range repoBottomFirst {
		p.RepoStack = append(p.RepoStack, id.String())
	}
	if hasInstall {
		p.InstallKey, p.InstallLayer = installKey, installID.String()
	}
	for _, id := range ids {
		p.Layers = append(p.Layers, c.store.TreePath(id))
	}
	if c.opts.CopyMode {
		t := time.Now()
		dir, err := c.assemble(ctx, ids)
		p.Timings["copy"] = time.Since(t)
		if err != nil {
			lease.Release()
			return nil, err
		}
		p.Layers, p.taskDir = []string{dir}, dir
	}
	return p, nil
}

func reverse(ids []store.LayerID) []store.LayerID {
	out := make([]store.LayerID, 0, len(ids))
	for i := len(ids) - 1; i >= 0; i-- {
		out = append(out, ids[i])
	}
	return out
}

// baseInfo is what environments are built on.
type baseInfo struct {
	host   bool
	layer  store.LayerID   // the root's top layer when !host
	stack  []store.LayerID // the root's layers, topmost first, when !host
	keyStr string          // what the environment key says about the base
	// env is the base's Env (an image's, a Debian base's or a
	// snapshot's config; none for the host), under every build's and
	// task's own (onBase).
	env []string
	// lease holds the root's layers warm while their trees are read
	// (baseFile), whatever msb cache compact does meanwhile; release
	// lets go of it.
	lease *store.Lease
}

func (b baseInfo) release() { b.lease.Release() }

// leaseRoot leases a base's layers, thawing those msb cache compact made
// cold: baseFile reads their trees directly.
func (c *Cache) leaseRoot(ctx context.Context, what string, root rootfs.Root) (baseInfo, error) {
	lease, err := c.store.Lease(ctx, root.Layers...)
	if err != nil {
		return baseInfo{}, fmt.Errorf("%s: %w", what, err)
	}
	top := root.Top()
	return baseInfo{layer: top, stack: reverse(root.Layers), keyStr: baseKey(top, root.Config.Env), env: root.Config.Env, lease: lease}, nil
}

// baseKey is what an environment key says about a base of layers: its top
// layer, and its Env where that sets more than a sandbox's default PATH
// (an image's variables change what builds on it do; a Debian base's Env
// is that PATH alone, so its keys stay as they were).
func baseKey(top store.LayerID, env []string) string {
	if len(env) == 0 || slices.Equal(env, []string{"PATH=" + systemPath}) {
		return top.String()
	}
	return top.String() + " env " + store.DigestOf([]byte(strings.Join(env, "\x00"))).Hex()[:16]
}

// onBase is env over the base's Env: env's variables replace the base's
// by name, except that where env's PATH ends in systemPath the base's
// PATH takes that place, so what the base puts on its PATH (a toolchain
// in /usr/local/go/bin, say) is found after the environment's own dirs.
func (b baseInfo) onBase(env []string) []string {
	if len(b.env) == 0 {
		return env
	}
	basePath := ""
	for _, kv := range b.env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			basePath = p
		}
	}
	if basePath != "" {
		env = slices.Clone(env)
		for i, kv := range env {
			if head, ok := strings.CutSuffix(kv, systemPath); ok && strings.HasPrefix(head, "PATH=") {
				env[i] = head + basePath
			}
		}
	}
	return envlist.Merge(b.env, env)
}

// base resolves Options.Base: the host, a layer or ref (base/rootfs), or
// an imported image (image/<ref>, whose layers, not its record, are the
// base). A base of layers is leased: release it when its files are read.
func (c *Cache) base(ctx context.Context) (baseInfo, error) {
	b := c.opts.Base
	src := rootfs.Resolve(c.store, b)
	if _, ok := src.(rootfs.Host); ok {
		osr, _ := os.ReadFile("/etc/os-release")
		return baseInfo{host: true, keyStr: "host:" + store.DigestOf(osr).Hex()[:16]}, nil
	}
	root, err := src.Root(ctx, c.store)
	if err != nil {
		return baseInfo{}, fmt.Errorf("base %q: %w (import one with msb cache import-rootfs or import-image)", b, err)
	}
	if root.HostBase {
		return baseInfo{}, fmt.Errorf("base %q: %w: %w", b, ErrBadBase, errHostUnder)
	}
	return c.leaseRoot(ctx, fmt.Sprintf("base %q", b), root)
}

// baseFile returns where the base's file rel (slash-separated, relative to
// the root) is on the host: in the topmost layer that has it, unless a
// layer above deletes it (an overlay whiteout, a 0/0 character device).
func (c *Cache) baseFile(base baseInfo, rel string) (string, bool) {
	for _, id := range base.stack {
		p := filepath.Join(c.store.TreePath(id), rel)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			continue
		}
		if st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0 {
			return "", false
		}
		return p, true
	}
	return "", false
}

// ImportRootfs commits a root filesystem tree (a debootstrap dir, an
// exported image) as the base layer under RootfsRef.
func (c *Cache) ImportRootfs(ctx context.Context, dir string) (store.LayerID, error) {
	return c.store.CommitDir(ctx, dir, store.CommitOptions{Ref: RootfsRef, MapOwner: OwnerAsRoot()})
}

// OwnerAsRoot is a store.CommitOptions.MapOwner that records the rootless
// caller's own uid and gid as root's (nil as root): the owner files a
// sandbox's root wrote have inside it.
func OwnerAsRoot() func(uid, gid uint32) (uint32, uint32) {
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	if uid == 0 {
		return nil
	}
	return func(u, g uint32) (uint32, uint32) {
		if u == uid {
			u = 0
		}
		if g == gid {
			g = 0
		}
		return u, g
	}
}

// ClearFailed clears the failure marker of key (or of every key when key
// is ""), so the next Prepare builds again.
func (c *Cache) ClearFailed(key string) error {
	if key != "" {
		err := os.Remove(c.path("failed", key+".json"))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	ents, err := os.ReadDir(c.path("failed"))
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.Remove(c.path("failed", e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// Failures lists the recorded build failures, oldest first.
func (c *Cache) Failures() ([]*BuildError, error) {
	ents, err := os.ReadDir(c.path("failed"))
	if err != nil {
		return nil, err
	}
	var out []*BuildError
	for _, e := range ents {
		if be := c.readFailure(strings.TrimSuffix(e.Name(), ".json")); be != nil {
			out = append(out, be)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}

func short(key string) string {
	if len(key) > 12 {
		return key[:12]
	}
	return key
}
