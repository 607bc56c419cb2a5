package cli

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/eval"
	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/spf13/pflag"
)

// datasetFlags choose instances and the spec file that says how to build
// and test them; cache build, validate and eval share them.
type datasetFlags struct {
	dataset   string
	instances []string
	regex     string
	slice     string
	specFile  string
}

func (f *datasetFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.dataset, "dataset", "", "instances: JSON, JSONL or Parquet (SWE-bench, SWE-smith, SWE-Gym or custom rows; rows may carry repo_url)")
	fs.StringSliceVar(&f.instances, "instances", nil, "only these instance ids (comma-separated)")
	fs.StringVar(&f.regex, "regex", "", "only instance ids matching this regular expression")
	fs.StringVar(&f.slice, "slice", "", "only rows start:end of the (filtered) dataset")
	fs.StringVar(&f.specFile, "spec", "", "YAML spec file adding or overriding specs (docs/spec-format.md)")
}

// load reads the chosen instances; bad rows are reported and skipped.
func (f *datasetFlags) load() ([]dataset.Instance, *spec.Overrides, error) {
	if f.dataset == "" {
		return nil, nil, fmt.Errorf("%w: --dataset is required", errUsage)
	}
	insts, rowErrs, err := dataset.Load(f.dataset, dataset.Filter{IDs: f.instances, Regex: f.regex, Slice: f.slice})
	if err != nil {
		return nil, nil, err
	}
	for _, re := range rowErrs {
		fmt.Fprintln(os.Stderr, "msb: skipping row:", re)
	}
	if len(insts) == 0 {
		return nil, nil, fmt.Errorf("%w: no instance of %s matches", errUsage, f.dataset)
	}
	ov, err := loadOverrides(f.specFile)
	return insts, ov, err
}

// loadOverrides reads a spec file; no path means no overrides.
func loadOverrides(path string) (*spec.Overrides, error) {
	if path == "" {
		return nil, nil
	}
	return spec.LoadOverrides(path)
}

// envFlags say how environments are found and built.
type envFlags struct {
	pythons     []string
	sources     []string
	wheels      string
	base        string
	siteLibs    bool
	copyMode    bool
	retryFailed bool
	reposDir    string
	downloads   string
	buildNet    bool
}

func (f *envFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.pythons, "python", nil, "interpreter for a Python version, e.g. 3.9=/usr/bin/python3.9 (repeatable)")
	fs.StringArrayVar(&f.sources, "repo-source", nil, "where to mirror a repository from, owner/name=PATH_OR_URL (repeatable)")
	fs.StringVar(&f.wheels, "wheelhouse", "", "a directory of wheels: pip installs offline from it only")
	fs.StringVar(&f.base, "base", "host", "what environments are built on: host, or a ref/digest of an imported rootfs (e.g. base/rootfs)")
	fs.BoolVar(&f.siteLibs, "system-site-packages", false, "venvs see the interpreter's site-packages (e.g. Debian's python3-* packages, for offline hosts)")
	fs.BoolVar(&f.copyMode, "copy-mode", false, "copy the layers into a private root per task instead of overlay mounts (slower; for hosts where msb doctor finds no overlayfs)")
	fs.BoolVar(&f.retryFailed, "retry-failed", false, "build again environments whose earlier build failed")
	fs.StringVar(&f.reposDir, "repos-dir", "", "a directory of repositories to mirror from, as owner__name.git or owner__name")
	fs.StringVar(&f.downloads, "download-cache", "", "directory of downloaded packages shared by builds (default <cache>/downloads)")
	fs.BoolVar(&f.buildNet, "build-network", false, "build sandboxes reach the package index (through msb's caching proxy); off, builds install from the download cache alone")
}

// options are the envcache options the flags give (Dir and Runtime are the
// caller's).
func (f *envFlags) options() (envcache.Options, error) {
	pythons, err := keyValues(f.pythons, "--python")
	if err != nil {
		return envcache.Options{}, err
	}
	sources, err := keyValues(f.sources, "--repo-source")
	if err != nil {
		return envcache.Options{}, err
	}
	return envcache.Options{Pythons: pythons, RepoSources: sources, Wheelhouse: f.wheels, Base: f.base,
		SystemSitePackages: f.siteLibs, CopyMode: f.copyMode, RetryFailed: f.retryFailed,
		ReposDir: f.reposDir, DownloadCache: f.downloads, BuildNetwork: f.buildNet}, nil
}

// evalFlags are validate's and eval's: instances, environments, and the
// evaluation sandboxes.
type evalFlags struct {
	datasetFlags
	envFlags
	cacheDir string
	workers  int
	timeout  time.Duration
	memory   string
	runID    string
	outDir   string
	reward   string
	network  string
}

func (f *evalFlags) register(fs *pflag.FlagSet) {
	f.datasetFlags.register(fs)
	f.envFlags.register(fs)
	fs.StringVar(&f.cacheDir, "cache", envOr("MSB_CACHE", envcache.DefaultDir()), "environment cache dir (env MSB_CACHE)")
	fs.IntVar(&f.workers, "workers", 2, "instances evaluated at once (also bounded by available memory)")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Minute, "test command timeout per instance")
	fs.StringVar(&f.memory, "memory", "", "memory limit of each evaluation sandbox (default 4G)")
	fs.StringVar(&f.outDir, "out", "logs/run_evaluation", "where per-instance files and the run summary go")
	fs.StringVar(&f.reward, "reward", string(grading.RewardBinary), "reward in result.json: binary (1 when resolved) or fraction (share of graded tests that pass)")
	fs.StringVar(&f.network, "eval-network", sandbox.NetworkNone, "network of evaluation sandboxes: none (loopback only) or host")
}

// options builds the evaluation options: runtime, cache, limits.
func (f *evalFlags) options(g *globals) (eval.Options, error) {
	mode := grading.RewardMode(f.reward)
	if mode != grading.RewardBinary && mode != grading.RewardFraction && mode != "" {
		return eval.Options{}, fmt.Errorf("%w: --reward %q: use binary or fraction", errUsage, f.reward)
	}
	if f.network != sandbox.NetworkNone && f.network != sandbox.NetworkHost {
		return eval.Options{}, fmt.Errorf("%w: --eval-network %q: use none or host", errUsage, f.network)
	}
	rt, err := g.jobRuntime()
	if err != nil {
		return eval.Options{}, err
	}
	co, err := f.envFlags.options()
	if err != nil {
		return eval.Options{}, err
	}
	co.Dir, co.Runtime, co.Logger = f.cacheDir, rt, g.logger()
	cache, err := envcache.Open(co)
	if err != nil {
		return eval.Options{}, err
	}
	mem, err := parseBytes(f.memory)
	if err != nil {
		return eval.Options{}, fmt.Errorf("%w: --memory: %v", errUsage, err)
	}
	return eval.Options{Cache: cache, Runtime: rt, TestTimeout: f.timeout, Limits: sandbox.Limits{MemoryBytes: mem}, Reward: mode, Network: f.network}, nil
}

func keyValues(list []string, flag string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%w: %s %q: want KEY=VALUE", errUsage, flag, kv)
		}
		out[k] = v
	}
	return out, nil
}
