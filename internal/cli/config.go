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

	"github.com/minisandbox/msb/internal/engine/host"
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
	UID          int
	// cacheEnviron: what the environment cache reads (full.go); nothing
	// in the lean msb, which has no cache.
	cacheEnviron
}

func readEnviron(lookup func(string) (string, bool)) environ {
	get := func(k string) string { v, _ := lookup(k); return v }
	e := environ{StateDir: get("MSB_STATE_DIR"), Cache: get("MSB_CACHE"), CgroupParent: get("MSB_CGROUP_PARENT"),
		Config: get("MSB_CONFIG"), RuntimeDir: get("XDG_RUNTIME_DIR"), UserCacheDir: get("XDG_CACHE_HOME"), TmpDir: get("TMPDIR"),
		PodmanImage: get("MSB_BENCH_PODMAN_IMAGE"), PodmanFlags: get("MSB_BENCH_PODMAN_FLAGS"),
		Socket: get("MSB_SOCKET"), Token: get("MSB_TOKEN"), SwerexRemote: get("MSB_BENCH_SWEREX"), UID: os.Getuid(),
		cacheEnviron: readCacheEnviron(get)}
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
	// CompactUnused is msb serve's --compact-unused (nil: not in the file).
	CompactUnused *time.Duration `yaml:"compact_unused"`
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
		s.StateDir = host.DefaultStateDir(g.env.RuntimeDir)
	}
	s.CacheDir = first(g.cacheDir, g.env.Cache, s.file.CacheDir, defaultCacheDir(g.env.UserCacheDir))
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
