//go:build !msblean

package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/engine"
)

// datasetFlags choose instances and the spec file that says how to build
// and test them; cache build, validate and eval share them.
type datasetFlags struct {
	dataset   string
	instances []string
	regex     string
	slice     string
	specFile  string
	skipBad   bool
}

func (f *datasetFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.dataset, "dataset", "", "instances: JSON, JSONL or Parquet (SWE-bench, SWE-smith, SWE-Gym or custom rows; rows may carry repo_url)")
	fs.StringSliceVar(&f.instances, "instances", nil, "only these instance ids (comma-separated); an id the dataset lacks is an error")
	fs.StringVar(&f.regex, "regex", "", "only instance ids matching this regular expression")
	fs.StringVar(&f.slice, "slice", "", "only rows start:end of the (filtered) dataset")
	fs.StringVar(&f.specFile, "spec", "", "YAML spec file adding or overriding specs (docs/spec-format.md)")
	fs.BoolVar(&f.skipBad, "skip-bad-rows", false, "leave out dataset rows that are not valid instances (counted in the summary) instead of stopping")
}

// load reads the dataset into the engine: every bad row is an error unless
// --skip-bad-rows (then each is named on stderr and counted).
func (f *datasetFlags) load(e *engine.Engine) (*dataset.Dataset, error) {
	if f.dataset == "" {
		return nil, fmt.Errorf("%w: --dataset is required", errUsage)
	}
	d, err := e.LoadDataset(f.dataset, dataset.Filter{IDs: f.instances, Regex: f.regex, Slice: f.slice}, f.skipBad)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: --dataset: %w", errNoInput, err)
	}
	if err != nil {
		return nil, err
	}
	for _, re := range d.RowErrors {
		fmt.Fprintln(os.Stderr, "msb: skipping", re.Error())
	}
	if len(d.Selected) == 0 {
		return nil, fmt.Errorf("%w: no instance of %s matches", errUsage, f.dataset)
	}
	return d, nil
}

// ids are the selected instances' ids.
func ids(d *dataset.Dataset) []string {
	out := make([]string, len(d.Selected))
	for i, in := range d.Selected {
		out[i] = in.InstanceID
	}
	return out
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
	ioBudget    string
	reposDir    string
	downloads   string
	buildNet    bool
	imageTmpl   string
	fs          *pflag.FlagSet
}

func (f *envFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.pythons, "python", nil, "interpreter for a Python version, e.g. 3.9=/usr/bin/python3.9 (repeatable)")
	fs.StringArrayVar(&f.sources, "repo-source", nil, "where to mirror a repository from, owner/name=PATH_OR_URL (repeatable)")
	fs.StringVar(&f.wheels, "wheelhouse", "", "a directory of wheels: pip installs offline from it only")
	fs.StringVar(&f.base, "base", "", "what environments are built on: host (default), or a ref/digest of an imported rootfs (e.g. base/rootfs)")
	fs.BoolVar(&f.siteLibs, "system-site-packages", false, "venvs see the interpreter's site-packages (e.g. Debian's python3-* packages, for offline hosts)")
	fs.BoolVar(&f.copyMode, "copy-mode", false, "copy the layers into a private root per task instead of overlay mounts (slower; for hosts where msb doctor finds no overlayfs)")
	fs.BoolVar(&f.retryFailed, "retry-failed", false, "build again environments whose earlier build failed")
	fs.StringVar(&f.ioBudget, "io-budget", "", "bytes of copying/building in flight at once, e.g. 512M, 2G (default 2G; 0: unbounded)")
	fs.StringVar(&f.reposDir, "repos-dir", "", "a directory of repositories to mirror from, as owner__name.git or owner__name (after --repo-source, before GitHub)")
	fs.StringVar(&f.downloads, "download-cache", "", "directory of downloaded packages shared by builds (default <cache>/downloads)")
	fs.BoolVar(&f.buildNet, "build-network", false, "build sandboxes reach the package index (through msb's caching proxy, which fills the download cache); off, builds install from the download cache alone")
	fs.StringVar(&f.imageTmpl, "image-template", "", "image of each dataset row that names none (no docker_image), from its fields, e.g. 'sweb.eval.x86_64.{instance_id_1776}' (docs/dataset-format.md); import the images first")
	f.fs = fs
}

// apply puts the flags given into the cache config (flags beat the config file).
func (f *envFlags) apply(c *engine.CacheConfig) error {
	pythons, err := keyValues(f.pythons, "--python")
	if err != nil {
		return err
	}
	sources, err := keyValues(f.sources, "--repo-source")
	if err != nil {
		return err
	}
	c.Pythons = mergeMaps(c.Pythons, pythons)
	c.RepoSources = mergeMaps(c.RepoSources, sources)
	if f.wheels != "" {
		c.Wheelhouse = f.wheels
	}
	if f.base != "" {
		c.Base = f.base
	}
	if f.reposDir != "" {
		c.ReposDir = f.reposDir
	}
	if f.downloads != "" {
		c.DownloadCache = f.downloads
	}
	if f.imageTmpl != "" {
		if err := dataset.CheckImageTemplate(f.imageTmpl); err != nil {
			return fmt.Errorf("%w: --image-template: %w", errUsage, err)
		}
		c.ImageTemplate = f.imageTmpl
	}
	c.BuildNetwork = c.BuildNetwork || f.buildNet
	c.SystemSitePackages = c.SystemSitePackages || f.siteLibs
	c.CopyMode = c.CopyMode || f.copyMode
	c.RetryFailed = f.retryFailed
	if f.ioBudget != "" {
		if c.IOBudget, err = parseBytes(f.ioBudget); err != nil {
			return fmt.Errorf("%w: --io-budget: %v", errUsage, err)
		}
	}
	return nil
}

func mergeMaps(base, over map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// evalFlags are validate's and eval's: instances, environments, and the
// evaluation sandboxes.
type evalFlags struct {
	datasetFlags
	envFlags
	workers    int
	timeout    time.Duration
	memory     string
	disk       string
	runID      string
	outDir     string
	reward     string
	integrity  string
	canary     string
	network    string
	keepErrors bool
	flags      *pflag.FlagSet
}

func (f *evalFlags) register(fs *pflag.FlagSet) {
	f.datasetFlags.register(fs)
	f.envFlags.register(fs)
	fs.IntVar(&f.workers, "workers", 2, "instances evaluated at once (at least 1; also bounded by available memory)")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Minute, "test command timeout per instance")
	fs.StringVar(&f.memory, "memory", "", "memory limit of each evaluation sandbox (default 4G)")
	fs.StringVar(&f.disk, "disk", "", "disk limit of each evaluation sandbox, e.g. 10G (default: the sandbox default)")
	fs.StringVar(&f.outDir, "out", "logs/run_evaluation", "where per-instance files and the run summaries go")
	fs.StringVar(&f.reward, "reward", string(api.RewardBinary), "reward in result.json: binary (1 when resolved) or fraction (share of graded tests that pass)")
	fs.StringVar(&f.integrity, "integrity", string(api.IntegrityWarn), "a patch that tampers with the test machinery: warn (keep the harness's verdict, flag it beside) or fail (unresolved, reward 0)")
	fs.StringVar(&f.canary, "canary", string(api.CanaryForked), "where the integrity canary runs: forked (secret: the eval script's set-up runs once, then its sandbox is forked for the tests and the canary), separate (as secret: a sandbox of its own, beside the harness's run, with the eval steps run again), inline (after the harness's tests in its sandbox: cheaper, a patch can tell) or off (static and channel checks only)")
	fs.StringVar(&f.network, "eval-network", "", "network of evaluation sandboxes: none (no route out) or host (default none)")
	fs.BoolVar(&f.keepErrors, "keep-errors", false, "on resume, keep results that ended without a verdict instead of evaluating them again")
	f.flags = fs
}

// options checks the flags and turns them into engine options. It runs
// before anything is opened, so a bad flag creates nothing.
func (f *evalFlags) options() (engineOptions, error) {
	o := engineOptions{env: &f.envFlags, specFile: f.specFile, reward: api.RewardMode(f.reward)}
	if o.reward != api.RewardBinary && o.reward != api.RewardFraction {
		return o, fmt.Errorf("%w: --reward %q: use binary or fraction", errUsage, f.reward)
	}
	if o.integrity = api.IntegrityMode(f.integrity); o.integrity != api.IntegrityWarn && o.integrity != api.IntegrityFail {
		return o, fmt.Errorf("%w: --integrity %q: use warn or fail", errUsage, f.integrity)
	}
	if o.canary = api.CanaryMode(f.canary); o.canary == "" || !o.canary.Valid() {
		return o, fmt.Errorf("%w: --canary %q: use forked, separate, inline or off", errUsage, f.canary)
	}
	if err := checkNetwork("--eval-network", f.network); err != nil {
		return o, err
	}
	o.evalNetwork = f.network
	if f.workers < 1 {
		return o, fmt.Errorf("%w: --workers %d: at least 1", errUsage, f.workers)
	}
	if f.timeout <= 0 {
		return o, fmt.Errorf("%w: --timeout %s: must be positive", errUsage, f.timeout)
	}
	o.timeout = f.timeout
	var err error
	if o.limits.MemoryBytes, err = sizeFlag(f.flags, "memory", f.memory); err != nil {
		return o, err
	}
	if o.limits.DiskBytes, err = sizeFlag(f.flags, "disk", f.disk); err != nil {
		return o, err
	}
	if err := api.CheckName("--run-id", f.runID); err != nil {
		return o, fmt.Errorf("%w: %w", errUsage, err)
	}
	return o, nil
}

// checkNetwork refuses an evaluation network other than none or host
// ("" is the default).
func checkNetwork(what, v string) error {
	switch v {
	case "", engine.NetworkNone, engine.NetworkHost:
		return nil
	}
	return fmt.Errorf("%w: %s %q: use %s or %s", errUsage, what, v, engine.NetworkNone, engine.NetworkHost)
}
