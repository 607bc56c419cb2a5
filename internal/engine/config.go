package engine

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/spec"
)

// Config is what an Engine is opened with. Zero values pick the defaults.
type Config struct {
	// StateDir holds running sandboxes' state (default: see
	// sandbox.DefaultStateDir, computed by the caller).
	StateDir string
	// CgroupParent is a directory in a delegated cgroup (v2 or v1) for
	// rootless limits.
	CgroupParent string
	// InitBinary is the sandbox init executable (default: msb-sandbox next
	// to the running executable, else the running executable).
	InitBinary string
	Cache      CacheConfig
	// Overrides are the user's spec file, nil for none.
	Overrides *spec.Overrides
	// Limits are every sandbox's defaults; a request's non-zero fields
	// replace them; zero fields fall back to sandbox.DefaultLimits.
	Limits api.Limits
	// TestTimeout bounds an evaluation's eval script (default 30 minutes).
	TestTimeout time.Duration
	// MaxLog caps the bytes of test output kept per evaluation (default 64 MiB).
	MaxLog int
	// Reward is how results' rewards are computed (default binary).
	Reward api.RewardMode
	// Integrity is what a model patch found tampered with the test
	// machinery does to its result: api.IntegrityFail (the default, for
	// rewards) or api.IntegrityWarn (msb eval's: the harness's verdict
	// with the flag beside it).
	Integrity api.IntegrityMode
	// Canary is where an evaluation runs its integrity canary:
	// api.CanaryForked (the default, "": secret, the eval steps run once:
	// task.EvalOptions.Fork), api.CanarySeparate (as secret, in a
	// sandbox of its own beside the harness's run when admission has
	// room), api.CanaryInline or api.CanaryOff.
	Canary api.CanaryMode
	// EvalNetwork is the network of evaluation sandboxes: sandbox.NetworkNone
	// (the default, no route out) or sandbox.NetworkHost. With none,
	// RunValidation evaluates again with the host's network the gold
	// patches that do not resolve (api.Validation.NeedsNetwork).
	EvalNetwork string
	// MemoryBudget is the memory admitted sandboxes may reserve in total:
	// 0 is the memory available when the engine opens; negative admits
	// everything.
	MemoryBudget int64
	// MemoryReserve is what admission counts of a sandbox's memory against
	// MemoryBudget: min(its memory limit, MemoryReserve); 0 is
	// DefaultMemoryReserve, negative the whole limit. The limit stays the
	// sandbox's ceiling; see DefaultMemoryReserve for the trade.
	MemoryReserve int64
	// DiskBudget is the disk admitted sandboxes may reserve in total (their
	// Limits.DiskBytes); 0 does not admit by disk.
	DiskBudget int64
	// MaxSandboxes bounds the live sandboxes, evaluations' included (0:
	// any number).
	MaxSandboxes int
	// GradingReserve is how many evaluation sandboxes of the default
	// limits the budgets keep room for that agents' sandboxes cannot take
	// (0: 1; negative: none). Without it, agents filling every slot and
	// each evaluating before closing would wait forever. It is cut to what
	// still leaves room for one agent's sandbox (see Engine.Quota).
	GradingReserve int
	// Spares is how many sandboxes the engine keeps started ahead (the warm
	// pool, pool.go), for the instances, images and snapshots asked for
	// most recently (0: none): a create or fork that finds one takes it at
	// once instead of starting a sandbox. Each spare is admitted and holds
	// its room, and yields it to a create that finds none; each holds an
	// idle supervisor and shell. SparesPerInstance is the number of one
	// instance's or image's spares when no request asked for another
	// (default 1); a spare not taken within SpareIdle (default 5 minutes)
	// is closed.
	Spares            int
	SparesPerInstance int
	SpareIdle         time.Duration
	// Lifetime and IdleTimeout are every sandbox's defaults (0: none); a
	// request may set its own. Past either the engine closes the sandbox
	// and its info says reaped.
	Lifetime    time.Duration
	IdleTimeout time.Duration
	// ReapInterval is how often lifetimes and idle times are checked
	// (default 250ms).
	ReapInterval time.Duration
	// KeepClosed is how many closed sandboxes' infos are kept, for an hour
	// each, to say what became of them (default 1000).
	KeepClosed int
	// ReleaseOwnDiskPool is for a command that ends after one batch (msb
	// demo, eval, validate): Close releases root mode's disk pool when
	// this engine made it (there was none at Open), after the sandboxes
	// and spares are closed. A pool that was there stays, and a daemon
	// keeps the pool it made, so that no run pays for making it (issue 32).
	ReleaseOwnDiskPool bool
	// CompactUnused, when positive, makes the engine compact in the
	// background, every CompactEvery (default: an hour, or CompactUnused
	// when shorter), the cache's layers unused for that long (compact.go;
	// msb serve's --compact-unused). 0 never does.
	CompactUnused time.Duration
	CompactEvery  time.Duration
	// Logger receives what the engine does (default: discarded).
	Logger *slog.Logger
}

func (c *Config) compactEvery() time.Duration {
	if c.CompactEvery > 0 {
		return c.CompactEvery
	}
	return min(time.Hour, c.CompactUnused)
}

func (c *Config) reapInterval() time.Duration {
	if c.ReapInterval > 0 {
		return c.ReapInterval
	}
	return 250 * time.Millisecond
}

// DefaultMemoryReserve is what admission counts by default of a sandbox's
// memory: its limit (default 4 GiB) is a ceiling for the moments its tests
// run, while an agent's sandbox spends most of its life idle or in small
// commands (a few MiB: docs/bench.md's idle PSS). Counting whole limits,
// a host of 16 GiB held 4 agents; counting this, 32, and a host of 128 GiB
// the hundreds the daemon is built for. The price is overcommit: sandboxes
// that all reach their limits at once can exhaust the host; a deployment
// that must exclude it sets MemoryReserve negative (or a smaller limit).
const DefaultMemoryReserve = 512 << 20

// memReserve is what admission counts of the memory of a sandbox of
// limits l (see MemoryReserve).
func (c *Config) memReserve(l sandbox.Limits) int64 {
	lim := memOf(l)
	switch {
	case c.MemoryReserve < 0:
		return lim
	case c.MemoryReserve == 0:
		return min(lim, DefaultMemoryReserve)
	}
	return min(lim, c.MemoryReserve)
}

// gradingLimits are the limits of an evaluation sandbox of no agent's
// sandbox (a batch job's, a validation's): the defaults. A sandbox's
// evaluation takes that sandbox's limits.
func (c *Config) gradingLimits() sandbox.Limits { return c.sandboxLimits(api.Limits{}) }

func (c *Config) gradingReserve() int {
	if c.GradingReserve == 0 {
		return 1
	}
	return max(c.GradingReserve, 0)
}

func (c *Config) spareIdle() time.Duration {
	if c.SpareIdle > 0 {
		return c.SpareIdle
	}
	return 5 * time.Minute
}

func (c *Config) tombstones() int {
	if c.KeepClosed > 0 {
		return c.KeepClosed
	}
	return 1000
}

// CacheConfig says where the environment cache is and how it builds.
type CacheConfig struct {
	// Dir is the cache directory (required).
	Dir string
	// IOBudget bounds bytes of copying and building in flight (0: none).
	IOBudget int64
	// Pythons maps a version ("3.9") to an interpreter path.
	Pythons map[string]string
	// PythonSearch is where other versions are looked for (the caller's
	// PATH, home, pyenv and uv dirs; zero: the system's dirs only).
	PythonSearch envcache.PythonSearch
	// Toolchains is where non-Python specs' toolchains are looked for
	// (PATH and MSB_TOOLCHAIN_<NAME>; zero: the system's dirs only).
	Toolchains envcache.ToolchainSearch
	// RepoSources maps "owner/name" to a URL or path to mirror from.
	RepoSources map[string]string
	// ReposDir holds local repositories to mirror from, named
	// owner__name.git or owner__name (after RepoSources, before GitHub).
	ReposDir string
	// Wheelhouse: pip installs offline from this directory only.
	Wheelhouse string
	// DownloadCache is the directory of downloaded distributions shared by
	// builds (default <Dir>/downloads).
	DownloadCache string
	// BuildNetwork gives build sandboxes (environments and install layers)
	// the host's network, pip going through the cache's proxy that fills
	// DownloadCache from IndexURL; off, builds install from the download
	// cache alone.
	BuildNetwork bool
	// IndexURL is the upstream package index of the build network
	// (default envcache.DefaultIndexURL).
	IndexURL string
	// Base: "host" (default) or a ref or digest of an imported rootfs.
	Base               string
	SystemSitePackages bool
	CopyMode           bool
	RetryFailed        bool
	// MustExist: fail with ErrNoCache instead of creating a missing cache
	// (inspection commands must not create one).
	MustExist bool
	// ImageTemplate names the image of each dataset row that names none
	// (dataset.Options.ImageTemplate); "": such rows build environments.
	ImageTemplate string
}

// check refuses a config that cannot be used (ErrBadRequest).
func (c *Config) check() error {
	if !c.Canary.Valid() {
		return fmt.Errorf("%w: canary mode %q: use %q, %q, %q or %q", ErrBadRequest, c.Canary, api.CanarySeparate, api.CanaryForked, api.CanaryInline, api.CanaryOff)
	}
	switch c.EvalNetwork {
	case "", sandbox.NetworkNone, sandbox.NetworkHost:
		return nil
	}
	return fmt.Errorf("%w: evaluation network %q: use %q or %q", ErrBadRequest, c.EvalNetwork, sandbox.NetworkNone, sandbox.NetworkHost)
}

// evalNetwork is the evaluation sandboxes' network.
func (c *Config) evalNetwork() string {
	if c.EvalNetwork == "" {
		return sandbox.NetworkNone
	}
	return c.EvalNetwork
}

// sandboxLimits merges a request's limits over the engine's defaults.
func (c *Config) sandboxLimits(req api.Limits) sandbox.Limits {
	pick := func(a, b int64) int64 {
		if a != 0 {
			return a
		}
		return b
	}
	l := sandbox.Limits{
		MemoryBytes: pick(req.MemoryBytes, c.Limits.MemoryBytes),
		Pids:        pick(req.Pids, c.Limits.Pids),
		TmpBytes:    pick(req.TmpBytes, c.Limits.TmpBytes),
		DiskBytes:   pick(req.DiskBytes, c.Limits.DiskBytes),
		CPUs:        req.CPUs,
	}
	if l.CPUs == 0 {
		l.CPUs = c.Limits.CPUs
	}
	return l
}

// apiLimits is the wire form of l, defaults filled in.
func apiLimits(l sandbox.Limits) api.Limits {
	d := sandbox.DefaultLimits
	pick := func(a, b int64) int64 {
		if a != 0 {
			return a
		}
		return b
	}
	return api.Limits{MemoryBytes: pick(l.MemoryBytes, d.MemoryBytes), Pids: pick(l.Pids, d.Pids), CPUs: l.CPUs,
		TmpBytes: pick(l.TmpBytes, d.TmpBytes), DiskBytes: pick(l.DiskBytes, d.DiskBytes)}
}
