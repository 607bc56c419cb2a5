package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/cgroup"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/minisandbox/msb/internal/task"
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

	// admit reserves sandboxes' memory limits (nil: no admission).
	admit  *semaphore.Weighted
	budget int64

	mu        sync.Mutex // guards the fields below
	closed    bool
	sandboxes map[string]*Sandbox
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
	rt, err := sandbox.NewRuntime(sandbox.RuntimeOptions{StateDir: cfg.StateDir, CgroupParent: cfg.CgroupParent, Exe: cfg.InitBinary, Logger: log})
	if err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, log: log, rt: rt, sandboxes: map[string]*Sandbox{}, instances: map[string]dataset.Instance{}, tasks: map[string]*task.Task{}}
	e.gc = rt.GC()
	if n := len(e.gc.Sandboxes) + len(e.gc.Cgroups); n > 0 {
		log.Info("cleaned up after a killed msb", "sandboxes", len(e.gc.Sandboxes), "processes", len(e.gc.Processes), "cgroups", len(e.gc.Cgroups))
	}
	if e.cache, err = openCache(cfg.Cache, rt, log); err != nil {
		return nil, err
	}
	e.env = task.Env{Runtime: rt, Cache: e.cache.c, Logger: log}
	switch {
	case cfg.MemoryBudget > 0:
		e.budget = cfg.MemoryBudget
	case cfg.MemoryBudget == 0:
		e.budget = cgroup.MemAvailable() // -1 when unknown: no admission
	default:
		e.budget = -1
	}
	if e.budget > 0 {
		e.admit = semaphore.NewWeighted(e.budget)
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

// Close closes every live sandbox, then the runtime (its disk pool); the
// engine cannot be used afterwards.
func (e *Engine) Close() error {
	e.mu.Lock()
	e.closed = true
	live := make([]*Sandbox, 0, len(e.sandboxes))
	for _, s := range e.sandboxes {
		live = append(live, s)
	}
	e.mu.Unlock()
	var errs []error
	for _, s := range live {
		errs = append(errs, s.Close())
	}
	errs = append(errs, e.rt.Close())
	return errors.Join(errs...)
}

// reserve admits a sandbox of memory limit mem, waiting while the budget
// is taken; release gives it back.
func (e *Engine) reserve(ctx context.Context, mem int64) (release func(), err error) {
	if e.admit == nil {
		return func() {}, nil
	}
	if mem > e.budget {
		return nil, fmt.Errorf("%w: a memory limit of %d MiB, and the budget is %d MiB (lower the limit or set the budget)", ErrTooLarge, mem>>20, e.budget>>20)
	}
	if err := e.admit.Acquire(ctx, mem); err != nil {
		return nil, err
	}
	return func() { e.admit.Release(mem) }, nil
}

// Concurrency is how many sandboxes of limits l fit in the memory budget
// at once (1<<20 when there is no budget).
func (e *Engine) Concurrency(l api.Limits) int {
	mem := e.cfg.sandboxLimits(l).MemoryBytes
	if mem == 0 {
		mem = sandbox.DefaultLimits.MemoryBytes
	}
	if e.admit == nil {
		return 1 << 20
	}
	return max(1, int(e.budget/mem))
}

// LoadDataset reads a dataset file and adds its valid instances to the
// engine. Rows that are not valid instances fail the load, naming every
// one, unless skipBad (then they are in Dataset.RowErrors and the run
// summaries count them).
func (e *Engine) LoadDataset(path string, f dataset.Filter, skipBad bool) (*dataset.Dataset, error) {
	d, err := dataset.Read(path, dataset.Options{Filter: f})
	if err != nil {
		if errors.Is(err, dataset.ErrUnknownID) || errors.Is(err, dataset.ErrBadFilter) {
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
		InstanceID: in.InstanceID, Repo: sp.Repo, Version: sp.Version, Python: sp.Python, Packages: sp.Packages,
		RequirementsPaths: sp.RequirementsPaths, EnvYMLPaths: sp.EnvYMLPaths, PipPackages: sp.PipPackages,
		PreInstall: sp.PreInstall, Install: sp.Install, EvalCommands: sp.EvalCommands, TestCmd: sp.TestCmd,
		Directives: string(sp.Directives), LogParser: sp.LogParser, Env: sp.Env, Source: sp.Source,
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

// evalOptions are the engine's evaluation options.
func (e *Engine) evalOptions(gradeEmpty bool) task.EvalOptions {
	return task.EvalOptions{Limits: e.cfg.sandboxLimits(api.Limits{}), TestTimeout: e.cfg.TestTimeout, MaxLog: e.cfg.MaxLog,
		Reward: e.cfg.Reward, GradeEmpty: gradeEmpty}
}

// Evaluate grades a patch of a known instance in a fresh sandbox (admitted
// like any other). model names the patch's author ("" is "none").
func (e *Engine) Evaluate(ctx context.Context, instanceID, model string, patch *string) (api.EvalResult, api.EvalArtifacts, error) {
	t, err := e.task(instanceID)
	if err != nil {
		return api.EvalResult{}, api.EvalArtifacts{}, err
	}
	if model == "" {
		model = "none"
	}
	ev, err := e.evaluate(ctx, t, api.Prediction{InstanceID: instanceID, Model: model, ModelPatch: patch}, false)
	return ev.Result, ev.Artifacts, err
}

// Validate evaluates a known instance's reference fix and an empty patch,
// each in a fresh sandbox, and says whether it is admitted.
func (e *Engine) Validate(ctx context.Context, instanceID string) (api.Validation, error) {
	t, err := e.task(instanceID)
	if err != nil {
		return api.Validation{}, err
	}
	fix, none := t.Instance.ReferenceFix(), ""
	gold, err := e.evaluate(ctx, t, api.Prediction{InstanceID: t.ID(), Model: "gold", ModelPatch: &fix}, false)
	if err != nil {
		return api.Validation{}, err
	}
	empty, err := e.evaluate(ctx, t, api.Prediction{InstanceID: t.ID(), Model: "empty", ModelPatch: &none}, true)
	if err != nil {
		return api.Validation{}, err
	}
	return task.Judge(gold.Result, empty.Result), nil
}

// evaluate runs one admitted evaluation. Its error is for admission only
// (the context ended while waiting); everything else is the outcome.
func (e *Engine) evaluate(ctx context.Context, t *task.Task, pred api.Prediction, gradeEmpty bool) (task.Evaluation, error) {
	o := e.evalOptions(gradeEmpty)
	release, err := e.reserve(ctx, memOf(o.Limits))
	if err != nil {
		return task.Evaluation{}, err
	}
	defer release()
	return task.Evaluate(ctx, e.env, t, pred, o), nil
}

func memOf(l sandbox.Limits) int64 {
	if l.MemoryBytes > 0 {
		return l.MemoryBytes
	}
	return sandbox.DefaultLimits.MemoryBytes
}
