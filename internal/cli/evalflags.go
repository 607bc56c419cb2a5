package cli

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/eval"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/spf13/pflag"
)

// evalFlags are shared by validate and eval: the dataset, its specs, the
// cache that builds environments, and the evaluation sandboxes.
type evalFlags struct {
	dataset   string
	instances []string
	regex     string
	slice     string
	specFile  string
	cacheDir  string
	pythons   []string
	sources   []string
	wheels    string
	siteLibs  bool
	copyMode  bool
	workers   int
	timeout   time.Duration
	memory    string
	runID     string
	outDir    string
}

func (f *evalFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.dataset, "dataset", "", "instances: JSON, JSONL or Parquet (SWE-bench, SWE-smith, SWE-Gym or custom rows)")
	fs.StringSliceVar(&f.instances, "instances", nil, "only these instance ids (comma-separated)")
	fs.StringVar(&f.regex, "regex", "", "only instance ids matching this regular expression")
	fs.StringVar(&f.slice, "slice", "", "only rows start:end of the (filtered) dataset")
	fs.StringVar(&f.specFile, "spec", "", "YAML spec file adding or overriding specs (docs/spec-format.md)")
	fs.StringVar(&f.cacheDir, "cache", envOr("MSB_CACHE", envcache.DefaultDir()), "environment cache dir (env MSB_CACHE)")
	fs.StringArrayVar(&f.pythons, "python", nil, "interpreter for a Python version, e.g. 3.9=/usr/bin/python3.9 (repeatable)")
	fs.StringArrayVar(&f.sources, "repo-source", nil, "where to mirror a repository from, owner/name=PATH_OR_URL (repeatable)")
	fs.StringVar(&f.wheels, "wheelhouse", "", "a directory of wheels for offline installs (pip --no-index --find-links)")
	fs.BoolVar(&f.siteLibs, "system-site-packages", false, "environments see the interpreter's site-packages (e.g. Debian's python3-* packages, for offline hosts)")
	fs.BoolVar(&f.copyMode, "copy-mode", false, "copy the layers into a private root per task instead of overlay mounts (slower; for hosts where msb doctor finds no overlayfs)")
	fs.IntVar(&f.workers, "workers", 2, "instances evaluated at once (also bounded by available memory)")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Minute, "test command timeout per instance")
	fs.StringVar(&f.memory, "memory", "", "memory limit of each evaluation sandbox (default 4G)")
	fs.StringVar(&f.outDir, "out", "logs/run_evaluation", "where per-instance files and the run summary go")
}

func (f *evalFlags) load() ([]dataset.Instance, *spec.Overrides, error) {
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

// options builds the evaluation options: runtime, cache, limits.
func (f *evalFlags) options(g *globals) (eval.Options, error) {
	rt, err := g.jobRuntime()
	if err != nil {
		return eval.Options{}, err
	}
	pythons, err := keyValues(f.pythons, "--python")
	if err != nil {
		return eval.Options{}, err
	}
	sources, err := keyValues(f.sources, "--repo-source")
	if err != nil {
		return eval.Options{}, err
	}
	cache, err := envcache.Open(envcache.Options{Dir: f.cacheDir, Runtime: rt, Pythons: pythons, RepoSources: sources,
		Wheelhouse: f.wheels, SystemSitePackages: f.siteLibs, CopyMode: f.copyMode, Logger: g.logger()})
	if err != nil {
		return eval.Options{}, err
	}
	mem, err := parseBytes(f.memory)
	if err != nil {
		return eval.Options{}, fmt.Errorf("%w: --memory: %v", errUsage, err)
	}
	return eval.Options{Cache: cache, Runtime: rt, TestTimeout: f.timeout, Limits: sandbox.Limits{MemoryBytes: mem}}, nil
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
