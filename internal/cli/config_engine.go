//go:build !msblean

package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/spec"
)

// engineOptions are what a command's own flags add to the settings.
type engineOptions struct {
	env      *envFlags // nil: the file's
	specFile string
	limits   api.Limits
	timeout  time.Duration
	reward   api.RewardMode
	// integrity: --integrity ("": the engine's default, fail).
	integrity api.IntegrityMode
	// canary: --canary ("": the engine's default, separate).
	canary api.CanaryMode
	// evalNetwork: --eval-network ("": the file's, else none).
	evalNetwork string
	// mustExist: the cache must exist already (inspection commands).
	mustExist bool
	// cacheDir replaces the settings' cache directory (msb demo's own).
	cacheDir string
	// newCache, newState: the command makes the cache or the state dir
	// when it does not exist, even one named by --cache or --state-dir
	// (cache build, import, pull; serve), see checkDir.
	newCache, newState bool
	// batch: the command ends after one batch (demo, eval, validate), so
	// the disk pool goes with it when it made it (engine.Config.ReleaseOwnDiskPool).
	batch bool
}

// cacheConfig is the cache part of the engine's config.
func (s *settings) cacheConfig(o engineOptions) (engine.CacheConfig, error) {
	f := s.file
	// An inspection command (mustExist) has the engine's own refusal,
	// which says how to make a cache.
	if err := checkDir("cache", s.CacheDir, s.cacheFlag && o.cacheDir == "" && !o.mustExist, o.newCache); err != nil {
		return engine.CacheConfig{}, err
	}
	c := engine.CacheConfig{Dir: first(o.cacheDir, s.CacheDir), Pythons: f.Pythons, PythonSearch: s.env.Pythons, Toolchains: s.env.Toolchains, RepoSources: f.RepoSources, Wheelhouse: f.Wheelhouse,
		Base: f.Base, SystemSitePackages: f.SystemSitePackages, CopyMode: f.CopyMode, MustExist: o.mustExist,
		ReposDir: f.ReposDir, DownloadCache: f.DownloadCache, BuildNetwork: f.BuildNetwork, IndexURL: f.IndexURL, ImageTemplate: f.ImageTemplate}
	var err error
	if c.IOBudget, err = parseBytes(first(f.IOBudget, "2G")); err != nil {
		return c, fmt.Errorf("%w: io_budget: %v", errUsage, err)
	}
	if o.env != nil {
		if err := o.env.apply(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}

func (s *settings) engineConfig(o engineOptions) (engine.Config, error) {
	if err := checkDir("state-dir", s.StateDir, s.stateFlag, o.newState); err != nil {
		return engine.Config{}, err
	}
	cc, err := s.cacheConfig(o)
	if err != nil {
		return engine.Config{}, err
	}
	cfg := engine.Config{StateDir: s.StateDir, CgroupParent: s.CgroupParent, Cache: cc, TestTimeout: o.timeout, Reward: o.reward, Integrity: o.integrity,
		Canary: o.canary, EvalNetwork: first(o.evalNetwork, s.file.EvalNetwork), ReleaseOwnDiskPool: o.batch}
	if err := checkNetwork("config file eval_network", s.file.EvalNetwork); err != nil {
		return cfg, err
	}
	if cfg.TestTimeout == 0 {
		cfg.TestTimeout = s.file.TestTimeout
	}
	if cfg.Limits, err = s.fileLimits(); err != nil {
		return cfg, err
	}
	mergeLimits(&cfg.Limits, o.limits)
	specFile := first(o.specFile, s.file.SpecFile)
	if specFile != "" {
		if cfg.Overrides, err = spec.LoadOverrides(specFile); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return cfg, fmt.Errorf("%w: --spec: %w", errNoInput, err)
			}
			return cfg, err
		}
	}
	return cfg, nil
}

func (s *settings) fileLimits() (api.Limits, error) {
	l := s.file.Limits
	out := api.Limits{Pids: l.Pids, CPUs: l.CPUs}
	var err error
	for _, f := range []struct {
		name, v string
		dst     *int64
	}{{"memory", l.Memory, &out.MemoryBytes}, {"tmp", l.Tmp, &out.TmpBytes}, {"disk", l.Disk, &out.DiskBytes}} {
		if *f.dst, err = parseBytes(f.v); err != nil {
			return out, fmt.Errorf("%w: config file limits.%s: %v", errUsage, f.name, err)
		}
	}
	return out, nil
}

// mergeLimits sets in dst every non-zero field of src.
func mergeLimits(dst *api.Limits, src api.Limits) {
	for _, p := range []struct{ d, s *int64 }{{&dst.MemoryBytes, &src.MemoryBytes}, {&dst.Pids, &src.Pids},
		{&dst.TmpBytes, &src.TmpBytes}, {&dst.DiskBytes, &src.DiskBytes}} {
		if *p.s != 0 {
			*p.d = *p.s
		}
	}
	if src.CPUs != 0 {
		dst.CPUs = src.CPUs
	}
}
