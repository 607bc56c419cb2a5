package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/spec"
)

// environ is what msb reads from its environment: here, once, and nowhere
// else (the packages below take values, not variables).
type environ struct {
	StateDir     string // MSB_STATE_DIR
	Cache        string // MSB_CACHE
	CgroupParent string // MSB_CGROUP_PARENT
	Config       string // MSB_CONFIG
	RuntimeDir   string // XDG_RUNTIME_DIR
	UserCacheDir string // $XDG_CACHE_HOME, else $HOME/.cache
	TmpDir       string // TMPDIR, else /tmp
	PodmanImage  string // MSB_BENCH_PODMAN_IMAGE (bench eval)
	PodmanFlags  string // MSB_BENCH_PODMAN_FLAGS
	Socket       string // MSB_SOCKET: the daemon the client verbs talk to
	Token        string // MSB_TOKEN: the daemon's token (TCP)
	SwerexRemote string // MSB_BENCH_SWEREX: swerex-remote for msb bench api
	// Pythons: where interpreters are searched for (PATH, HOME,
	// PYENV_ROOT, UV_PYTHON_INSTALL_DIR)
	Pythons envcache.PythonSearch
	// Toolchains: where toolchains are searched for (PATH, MSB_TOOLCHAIN_<NAME>)
	Toolchains envcache.ToolchainSearch
	UID        int
}

func readEnviron(lookup func(string) (string, bool)) environ {
	get := func(k string) string { v, _ := lookup(k); return v }
	e := environ{StateDir: get("MSB_STATE_DIR"), Cache: get("MSB_CACHE"), CgroupParent: get("MSB_CGROUP_PARENT"),
		Config: get("MSB_CONFIG"), RuntimeDir: get("XDG_RUNTIME_DIR"), UserCacheDir: get("XDG_CACHE_HOME"), TmpDir: get("TMPDIR"),
		PodmanImage: get("MSB_BENCH_PODMAN_IMAGE"), PodmanFlags: get("MSB_BENCH_PODMAN_FLAGS"),
		Socket: get("MSB_SOCKET"), Token: get("MSB_TOKEN"), SwerexRemote: get("MSB_BENCH_SWEREX"), UID: os.Getuid(),
		Pythons: envcache.PythonSearch{Path: filepath.SplitList(get("PATH")), Home: get("HOME"), PyenvRoot: get("PYENV_ROOT"), UVDir: get("UV_PYTHON_INSTALL_DIR")}, Toolchains: envcache.ToolchainSearchFromEnv(get)}
	if e.UserCacheDir == "" && get("HOME") != "" {
		e.UserCacheDir = filepath.Join(get("HOME"), ".cache")
	}
	if e.TmpDir == "" {
		e.TmpDir = "/tmp"
	}
	return e
}

// fileConfig is the optional config file (docs/config.md). Flags beat the
// environment, which beats the file, which beats the defaults.
type fileConfig struct {
	StateDir           string            `yaml:"state_dir"`
	CacheDir           string            `yaml:"cache_dir"`
	CgroupParent       string            `yaml:"cgroup_parent"`
	IOBudget           string            `yaml:"io_budget"`
	Base               string            `yaml:"base"`
	Wheelhouse         string            `yaml:"wheelhouse"`
	ReposDir           string            `yaml:"repos_dir"`
	DownloadCache      string            `yaml:"download_cache"`
	BuildNetwork       bool              `yaml:"build_network"`
	IndexURL           string            `yaml:"index_url"`
	EvalNetwork        string            `yaml:"eval_network"`
	SystemSitePackages bool              `yaml:"system_site_packages"`
	CopyMode           bool              `yaml:"copy_mode"`
	Pythons            map[string]string `yaml:"pythons"`
	RepoSources        map[string]string `yaml:"repo_sources"`
	SpecFile           string            `yaml:"spec"`
	ImageTemplate      string            `yaml:"image_template"`
	Limits             struct {
		Memory string  `yaml:"memory"`
		Pids   int64   `yaml:"pids"`
		CPUs   float64 `yaml:"cpus"`
		Tmp    string  `yaml:"tmp"`
		Disk   string  `yaml:"disk"`
	} `yaml:"limits"`
	TestTimeout time.Duration `yaml:"test_timeout"`
}

// settings are the resolved global settings.
type settings struct {
	StateDir, CacheDir, CgroupParent string
	// StateDirGiven: the state dir was named (flag, environment or file),
	// not the default.
	StateDirGiven bool
	// stateFlag, cacheFlag: the directory was named by --state-dir or
	// --cache, typed at this command, so one that does not exist is taken
	// for a typo (checkDir); the environment's and the config file's are
	// a standing setup, made on first use like the defaults.
	stateFlag, cacheFlag bool
	file                 fileConfig
	env                  environ
}

// checkDir refuses a directory named by a flag (--cache, --state-dir)
// that does not exist, naming it, instead of making it where a typo
// pointed; a command that makes a new one (make) passes.
func checkDir(flag, dir string, named, make bool) error {
	if !named || make {
		return nil
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: --%s %s: it does not exist (msb makes only the default; create it first)", errNoDir, flag, dir)
	case err != nil:
		return fmt.Errorf("%w: --%s: %w", errNoDir, flag, err)
	case !fi.IsDir():
		return fmt.Errorf("%w: --%s %s: not a directory", errNoDir, flag, dir)
	}
	return nil
}

func resolveSettings(g *globals) (*settings, error) {
	s := &settings{env: g.env}
	path := first(g.configFile, g.env.Config)
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%w: config file: %w", errUsage, err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&s.file); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: config file %s: %w", errUsage, path, err)
		}
	}
	s.StateDir = first(g.stateDir, g.env.StateDir, s.file.StateDir)
	s.StateDirGiven = s.StateDir != ""
	s.stateFlag, s.cacheFlag = g.stateDir != "", g.cacheDir != ""
	if s.StateDir == "" {
		s.StateDir = engine.DefaultStateDir(g.env.RuntimeDir)
	}
	s.CacheDir = first(g.cacheDir, g.env.Cache, s.file.CacheDir, envcache.DefaultDir(g.env.UserCacheDir))
	s.CgroupParent = first(g.env.CgroupParent, s.file.CgroupParent)
	return s, nil
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

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
