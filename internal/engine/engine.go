package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/cgroup"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/minisandbox/msb/internal/task"
	"github.com/minisandbox/msb/internal/warm"
)

// Engine holds the runtime, the cache, the specs and the live sandboxes.
// It is safe for concurrent use.
type Engine struct {
	cfg   Config
	log   *slog.Logger
	rt    *sandbox.Runtime
	cache *Cache
	env   task.Env
	gc    sandbox.GCReport

	// admit reserves sandboxes' memory and disk limits and counts them.
	admit *admission
	stats counters
	// spares are sandboxes started ahead: the warm pool (pool.go).
	spares *warm.Pool[poolKey, *Sandbox]
	// settling: the layers of forks whose children run before they are
	// published (forkearly.go).
	settling settling
	// ownPool: Close releases the disk pool (Config.ReleaseOwnDiskPool
	// and there was none at Open).
	ownPool bool

	stop chan struct{} // closed by Close: ends the reaper and the compactor
	done chan struct{} // closed when the reaper has ended
	// compact is the background compaction (Config.CompactUnused).
	compact compactor

	mu        sync.Mutex // guards the fields below
	closed    bool
	sandboxes map[string]*Sandbox
	gone      tombstones // sandboxes closed recently
	instances map[string]dataset.Instance
	tasks     map[string]*task.Task
}

// Open opens the runtime (collecting what killed msb processes left
// behind, see GCReport) and the cache.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.Logger = log
	if err := cfg.check(); err != nil {
		return nil, err
	}
	rt, err := sandbox.NewRuntime(sandbox.RuntimeOptions{StateDir: cfg.StateDir, CgroupParent: cfg.CgroupParent, Exe: cfg.InitBinary,
		DiskAdmitted: cfg.DiskBudget > 0, NetSpares: sandbox.EngineNetSpares, Logger: log}) // a reservation is given back when Close returns: see closeAs
	if err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, log: log, rt: rt, sandboxes: map[string]*Sandbox{}, instances: map[string]dataset.Instance{}, tasks: map[string]*task.Task{},
		gone: newTombstones(cfg.tombstones()), stop: make(chan struct{}), done: make(chan struct{})}
	e.ownPool = cfg.ReleaseOwnDiskPool && !rt.HasDiskPool()
	e.gc = rt.GC()
	if e.gc.Found() {
		log.Info("cleaned up after a killed msb", "sandboxes", len(e.gc.Sandboxes), "processes", len(e.gc.Processes), "cgroups", len(e.gc.Cgroups))
	}
	if len(e.gc.StaleCgroups) > 0 {
		log.Debug("removed empty cgroups", "cgroups", len(e.gc.StaleCgroups))
	}
	if e.cache, err = openCache(cfg.Cache, rt, log); err != nil {
		return nil, err
	}
	e.env = task.Env{Runtime: rt, Cache: e.cache.c, Logger: log}
	budget := int64(-1)
	switch {
	case cfg.MemoryBudget > 0:
		budget = cfg.MemoryBudget
	case cfg.MemoryBudget == 0:
		budget = cgroup.MemAvailable() // -1 when unknown: no admission by memory
	}
	e.spares = e.newPool()
	e.admit = newAdmission(budget, cfg.DiskBudget, cfg.MaxSandboxes)
	grading := cfg.gradingLimits()
	e.admit.holdBack(cfg.gradingReserve(), cfg.memReserve(grading), grading.DiskBytes)
	go e.reap()
	e.compact.done = make(chan struct{})
	if cfg.CompactUnused > 0 {
		go e.compactLoop()
	} else {
		close(e.compact.done)
	}
	return e, nil
}

// GCReport says what Open collected: sandboxes of msb processes that died.
func (e *Engine) GCReport() sandbox.GCReport { return e.gc }

// Mode is "root" or "rootless".
func (e *Engine) Mode() string { return e.rt.Mode() }

// Enforcement says which limits hold and by what mechanism.
func (e *Engine) Enforcement() api.Enforcement {
	en := e.rt.Enforcement()
	return api.Enforcement{Memory: en.Memory, Pids: en.Pids, CPU: en.CPU, Tmp: en.Tmp, Disk: en.Disk, HostFiles: en.HostFiles}
}

// Cache is the engine's environment cache.
func (e *Engine) Cache() *Cache { return e.cache }

// Close closes every live sandbox and the spares, releases the disk pool
// when the engine made it for a batch (Config.ReleaseOwnDiskPool), then
// closes the runtime; the engine cannot be used afterwards.
func (e *Engine) Close() error {
	e.mu.Lock()
	if !e.closed {
		close(e.stop)
	}
	e.closed = true
	e.mu.Unlock()
	e.waitSnapshots() // a stopping daemon keeps the snapshots it answered
	e.mu.Lock()
	live := make([]*Sandbox, 0, len(e.sandboxes))
	for _, s := range e.sandboxes {
		live = append(live, s)
	}
	e.mu.Unlock()
	var errs []error
	for _, s := range live {
		errs = append(errs, s.closeAs(api.SandboxClosed, ""))
	}
	<-e.done
	<-e.compact.done // a compaction under way is cancelled by stop
	e.spares.Close()
	if e.ownPool {
		if _, err := e.rt.ReleaseDiskPool(); err != nil {
			errs = append(errs, fmt.Errorf("%w; it stays mounted (msb gc --disk-pool removes it)", err))
		}
	}
	errs = append(errs, e.rt.Close())
	return errors.Join(errs...)
}

// reserve admits a sandbox of limits l for class c (see admission.acquire
// for wait); release gives its share back. A limit larger than its whole
// budget is refused; memory is admitted by Config.memReserve.
func (e *Engine) reserve(ctx context.Context, l sandbox.Limits, wait time.Duration, c class) (release func(), err error) {
	if err := e.admit.check(memOf(l), l.DiskBytes); err != nil {
		return nil, err
	}
	return e.admit.acquire(ctx, e.cfg.memReserve(l), l.DiskBytes, wait, c)
}

// Quota reports the admission budgets and what is reserved now.
func (e *Engine) Quota() api.Quota { return e.admit.quota() }

// Concurrency is how many sandboxes of limits l fit in the budgets at once
// (1<<20 when nothing bounds them).
func (e *Engine) Concurrency(l api.Limits) int {
	sl := e.cfg.sandboxLimits(l)
	n := 1 << 20
	if a := e.admit; a.memBudget > 0 {
		n = min(n, max(1, int(a.memBudget/e.cfg.memReserve(sl))))
	}
	if a := e.admit; a.diskBudget > 0 && sl.DiskBytes > 0 {
		n = min(n, max(1, int(a.diskBudget/sl.DiskBytes)))
	}
	if e.admit.maxCount > 0 {
		n = min(n, e.admit.maxCount)
	}
	return n
}

// LoadDataset reads a dataset file and adds its valid instances to the
// engine. Rows that are not valid instances fail the load, naming every
// one, unless skipBad (then they are in Dataset.RowErrors and the run
// summaries count them).
func (e *Engine) LoadDataset(path string, f dataset.Filter, skipBad bool) (*dataset.Dataset, error) {
	d, err := dataset.Read(path, dataset.Options{Filter: f, ImageTemplate: e.cfg.Cache.ImageTemplate})
	if err != nil {
		if errors.Is(err, dataset.ErrUnknownID) || errors.Is(err, dataset.ErrBadFilter) || errors.Is(err, dataset.ErrBadImageTemplate) {
			return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		return nil, err
	}
	if len(d.RowErrors) > 0 && !skipBad {
		lines := make([]string, len(d.RowErrors))
		for i, re := range d.RowErrors {
			lines[i] = re.Error()
		}
		return nil, fmt.Errorf("%w: %s has %d bad rows (fix them, or pass --skip-bad-rows to run without them):\n  %s",
			ErrBadRequest, path, len(lines), strings.Join(lines, "\n  "))
	}
	if err := e.Add(d.All...); err != nil {
		return nil, err
	}
	return d, nil
}

// Add makes instances known to the engine (an id added again is replaced).
// Each must have a usable spec; the error names every one that has not.
func (e *Engine) Add(insts ...dataset.Instance) error {
	var bad []string
	tasks := make([]*task.Task, 0, len(insts))
	for _, in := range insts {
		if err := api.CheckName("instance_id", in.InstanceID); err != nil {
			bad = append(bad, err.Error())
			continue
		}
		t, err := task.New(in, e.cfg.Overrides)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		tasks = append(tasks, t)
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %d instances cannot be run:\n  %s", ErrBadRequest, len(bad), strings.Join(bad, "\n  "))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, t := range tasks {
		e.instances[t.ID()] = t.Instance
		e.tasks[t.ID()] = t
	}
	return nil
}

// Instance returns a known instance.
func (e *Engine) Instance(id string) (dataset.Instance, error) {
	t, err := e.task(id)
	if err != nil {
		return dataset.Instance{}, err
	}
	return t.Instance, nil
}

// InstanceIDs lists the known instances, sorted.
func (e *Engine) InstanceIDs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]string, 0, len(e.instances))
	for id := range e.instances {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Spec is the resolved spec of a known instance, as data.
func (e *Engine) Spec(id string) (api.SpecView, error) {
	t, err := e.task(id)
	if err != nil {
		return api.SpecView{}, err
	}
	sp, in := t.Spec, t.Instance
	return api.SpecView{
		InstanceID: in.InstanceID, Repo: sp.Repo, Version: sp.Version, Language: sp.Language, Toolchains: sp.Toolchains, Python: sp.Python, Bootstrap: sp.Bootstrap,
		Packages: sp.Packages, PackagesPip: sp.PackagesPip, IndexDate: sp.IndexDate,
		RequirementsPaths: sp.RequirementsPaths, EnvYMLPaths: sp.EnvYMLPaths, PipPackages: sp.PipPackages, SystemPackages: sp.SystemPackages,
		PreInstall: sp.PreInstall, Install: sp.Install, EvalCommands: sp.EvalCommands, EvalInstall: sp.EvalInstall, TestCmd: sp.TestCmd,
		Directives: string(sp.Directives), LogParser: sp.LogParser, Env: sp.Env, EvalEnv: sp.EvalEnv, Source: sp.Source,
		TestCommand: sp.TestCommand(in), TestFiles: t.TestFiles(), EnvironmentCommit: spec.EnvironmentCommit(in), Digest: t.SpecDigest,
	}, nil
}

func (e *Engine) task(id string) (*task.Task, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.tasks[id]
	if !ok {
		return nil, fmt.Errorf("%w: instance %q (load its dataset first)", ErrNotFound, id)
	}
	return t, nil
}

// evalOptions are the engine's evaluation options, for an evaluation
// sandbox with network.
func (e *Engine) evalOptions(gradeEmpty bool, network string) task.EvalOptions {
	return task.EvalOptions{Limits: e.cfg.gradingLimits(), TestTimeout: e.cfg.TestTimeout, MaxLog: e.cfg.MaxLog,
		Reward: e.cfg.Reward, GradeEmpty: gradeEmpty, Network: network, Integrity: e.cfg.Integrity, Canary: e.cfg.Canary, Fork: e.evalFork}
}

// Evaluate grades a patch of a known instance in a fresh sandbox (admitted
// like any other). model names the patch's author ("" is "none").
func (e *Engine) Evaluate(ctx context.Context, instanceID, model string, patch *string) (api.EvalResult, api.EvalArtifacts, error) {
	return e.evaluateIn(ctx, job{pred: api.Prediction{InstanceID: instanceID, Model: model, ModelPatch: patch}})
}

// EvaluateCanary is Evaluate with its integrity canary run as mode says
// (Config.Canary is the default; msb bench integrity compares them).
func (e *Engine) EvaluateCanary(ctx context.Context, instanceID, model string, patch *string, mode api.CanaryMode) (api.EvalResult, api.EvalArtifacts, error) {
	if !mode.Valid() {
		return api.EvalResult{}, api.EvalArtifacts{}, fmt.Errorf("%w: canary mode %q", ErrBadRequest, mode)
	}
	return e.evaluateIn(ctx, job{pred: api.Prediction{InstanceID: instanceID, Model: model, ModelPatch: patch}, canary: mode})
}

// evaluateIn is Evaluate of j's prediction, with j's limits (nil: the
// grading defaults) and repeat.
func (e *Engine) evaluateIn(ctx context.Context, j job) (api.EvalResult, api.EvalArtifacts, error) {
	if err := checkRepeat(j.repeat); err != nil {
		return api.EvalResult{}, api.EvalArtifacts{}, err
	}
	t, err := e.task(j.pred.InstanceID)
	if err != nil {
		return api.EvalResult{}, api.EvalArtifacts{}, err
	}
	if j.pred.Model == "" {
		j.pred.Model = "none"
	}
	j.t = t
	ev, err := e.evaluate(ctx, j)
	return ev.Result, ev.Artifacts, err
}

// Validate evaluates a known instance's reference fix and an empty patch,
// each in a fresh sandbox, and says whether it is admitted.
func (e *Engine) Validate(ctx context.Context, instanceID string) (api.Validation, error) {
	t, err := e.task(instanceID)
	if err != nil {
		return api.Validation{}, err
	}
	gold, empty := e.validationJobs(t)
	g, err := e.evaluate(ctx, gold)
	if err != nil {
		return api.Validation{}, err
	}
	em, err := e.evaluate(ctx, empty)
	if err != nil {
		return api.Validation{}, err
	}
	v := task.Judge(g.Result, em.Result)
	if again, ok := e.networkRecheck(v, gold); ok {
		withNet, err := e.evaluate(ctx, again)
		if err != nil {
			return v, err
		}
		var offline *api.EvalResult
		if withNet.Result.Outcome == api.OutcomeResolved {
			ev, err := e.evaluate(ctx, gold)
			if err != nil {
				return v, err
			}
			offline = &ev.Result
		}
		settleRecheck(&v, withNet.Result, offline)
	}
	return v, nil
}

// evaluate runs one admitted evaluation. Its error is for admission only
// (the context ended while waiting); everything else is the outcome.
func (e *Engine) evaluate(ctx context.Context, j job) (task.Evaluation, error) {
	o := e.evalOptions(j.gradeEmpty, j.network(e))
	if j.limits != nil {
		o.Limits = *j.limits
	}
	o.Progress, o.Repeat = j.progress(), j.repeat
	if j.canary != "" {
		o.Canary = j.canary
	}
	release, err := e.reserve(ctx, o.Limits, 0, gradingClass)
	if err != nil {
		return task.Evaluation{}, err
	}
	defer release()
	mem, disk := e.cfg.memReserve(o.Limits), o.Limits.DiskBytes
	o.Beside = func() (func(), bool) { return e.admit.tryTake(mem, disk, gradingClass) }
	ev := task.Evaluate(ctx, e.env, j.t, j.pred, o)
	e.stats.evaluated(ev.Result.Outcome)
	return ev, nil
}

func memOf(l sandbox.Limits) int64 {
	if l.MemoryBytes > 0 {
		return l.MemoryBytes
	}
	return sandbox.DefaultLimits.MemoryBytes
}

// AddRows adds dataset rows given inline (JSON objects, as lines of a JSONL
// file) and returns the dataset they make; every bad row is an error.
func (e *Engine) AddRows(rows []json.RawMessage) (*dataset.Dataset, error) {
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: no rows", ErrBadRequest)
	}
	f, err := os.CreateTemp("", "msb-rows-*.jsonl")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	for _, r := range rows {
		var compact bytes.Buffer
		if err := json.Compact(&compact, r); err != nil {
			f.Close()
			return nil, fmt.Errorf("%w: a row is not JSON: %w", ErrBadRequest, err)
		}
		compact.WriteByte('\n')
		if _, err := f.Write(compact.Bytes()); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return e.LoadDataset(f.Name(), dataset.Filter{}, false)
}

// InstanceInfo describes a known instance: its task and its spec.
func (e *Engine) InstanceInfo(id string) (api.InstanceInfo, error) {
	in, err := e.Instance(id)
	if err != nil {
		return api.InstanceInfo{}, err
	}
	sp, err := e.Spec(id)
	if err != nil {
		return api.InstanceInfo{}, err
	}
	return api.InstanceInfo{InstanceID: in.InstanceID, Repo: in.Repo, BaseCommit: in.BaseCommit, Version: in.Version,
		ProblemStatement: in.ProblemStatement, FailToPass: in.FailToPass, PassToPass: in.PassToPass, Spec: sp}, nil
}
